"""The journal contract (console/gateway/journal_store.py), the same tests on both engines:
SQLite (the embedded default) and a real PostgreSQL server (the project's own, from the
``pgserver`` wheel: tests/adapters/postgres_server.py), each test on a fresh database.

What is pinned down: ``begin`` is a replay or a new intent with its decision claim, in one
transaction (a store's ``also`` write included); ``settle`` writes outcome, claim and audit in
one transaction; unfinished intents, the pause ledger, the audit query, and the stores that
keep their tables in the journal (approvals, obligations, agents' policy decisions). On
PostgreSQL, two gateways (two connections) racing for one interrupt: one claim, one conflict.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.gateway.approval_store import ApprovalStore, RecordedCommand
from console.gateway.journal_engines import open_journal
from console.gateway.journal_store import (
    Intent,
    JournalStore,
    JournalTx,
    Settlement,
    redacted,
)
from console.gateway.obligation_store import ObligationStore
from console.model import AuditEntry, utcnow
from console.policy.model import Obligation, PolicyDecision
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture

OpenJournal = Callable[..., JournalStore]
_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def open_one(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenJournal]:
    """Opens journals on one fresh database (call it again: another gateway on the same one)."""
    opened: list[JournalStore] = []
    if request.param == "sqlite":
        where: str | Path = tmp_path / "gateway.db"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        name = f"journal_{next(_databases)}"
        with server.connect("postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        where = server.url(name)

    def open_journal_here(owner: str = "gw-a") -> JournalStore:
        journal = open_journal(where, owner=owner)
        opened.append(journal)
        return journal

    yield open_journal_here
    for journal in opened:
        journal.close()


def intent(key: str, target: str, *, claim: str | None = None, who: str = "alice") -> Intent:
    return Intent(key=key, target=target, action=claim or "pause", identity=who,
                  role="operator", reason="r", payload={"k": key},
                  plan=None if claim else {"action": "pause"}, claim_kind=claim)


def settlement(key: str, target: str, outcome: str, *, claimed: bool = False,
               who: str = "alice") -> Settlement:
    entry = AuditEntry(at=utcnow(), identity=who, role="operator", action="approve",
                       target=target, reason="r", outcome=outcome, command_id=key,
                       detail=f"{outcome} detail")
    return Settlement(key=key, target=target, outcome=outcome, detail=f"{outcome} detail",
                      error=None if outcome == "applied" else outcome, audit=entry,
                      claimed=claimed)


def test_begin_writes_the_intent_once_and_replays_the_row_under_the_same_key(
        open_one: OpenJournal):
    journal = open_one()
    assert journal.begin(intent("k1", "dbos:x/run-1")).status == "new"
    again = journal.begin(intent("k1", "dbos:x/run-1"))
    assert again.status == "replay" and again.row is not None
    assert (again.row.status, again.row.payload, again.row.owner) == ("intent", {"k": "k1"}, "gw-a")
    assert journal.begin(intent("k1", "dbos:x/run-2")).status == "new"  # key + target
    assert [r.target for r in journal.unfinished()] == ["dbos:x/run-1", "dbos:x/run-2"]
    journal.settle(settlement("k1", "dbos:x/run-1", "applied"))
    row = journal.command("k1", "dbos:x/run-1")
    assert row is not None and (row.status, row.detail) == ("applied", "applied detail")
    assert [r.target for r in journal.unfinished()] == ["dbos:x/run-2"]


def test_a_retry_outcome_keeps_its_new_run_id_for_the_replay(open_one: OpenJournal):
    journal = open_one()
    journal.begin(intent("r1", "dbos:x/run-1"))
    journal.begin(intent("p1", "dbos:x/run-2"))
    done = settlement("r1", "dbos:x/run-1", "applied")
    journal.settle(Settlement(**{**done.__dict__, "new_run_id": "dbos:x/fork-1"}))
    journal.settle(settlement("p1", "dbos:x/run-2", "applied"))
    row = journal.command("r1", "dbos:x/run-1")
    assert row is not None and row.new_run_id == "dbos:x/fork-1"
    replay = journal.begin(intent("r1", "dbos:x/run-1"))
    assert replay.row is not None and replay.row.new_run_id == "dbos:x/fork-1"
    other = journal.command("p1", "dbos:x/run-2")
    assert other is not None and other.new_run_id is None


def test_a_sqlite_journal_from_before_new_run_id_gains_the_column(tmp_path: Path):
    import sqlite3

    path = tmp_path / "gateway.db"
    with sqlite3.connect(path) as old:  # the commands table as the first release wrote it
        old.execute(
            "CREATE TABLE commands (key TEXT NOT NULL, target TEXT NOT NULL, action TEXT NOT"
            " NULL, identity TEXT NOT NULL, role TEXT NOT NULL, reason TEXT NOT NULL DEFAULT"
            " '', payload TEXT NOT NULL DEFAULT '{}', plan TEXT, status TEXT NOT NULL, error"
            " TEXT, detail TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, finished_at"
            " TEXT, PRIMARY KEY (key, target))")
        old.execute("INSERT INTO commands (key, target, action, identity, role, status,"
                    " created_at) VALUES ('k0', 'dbos:x/r0', 'pause', 'a', 'operator',"
                    " 'applied', ?)", (utcnow().isoformat(),))
    journal = open_journal(path, owner="gw-a")
    try:
        row = journal.command("k0", "dbos:x/r0")
        assert row is not None and row.new_run_id is None and row.status == "applied"
        journal.begin(intent("r1", "dbos:x/r1"))
        done = settlement("r1", "dbos:x/r1", "applied")
        journal.settle(Settlement(**{**done.__dict__, "new_run_id": "dbos:x/fork"}))
        again = journal.command("r1", "dbos:x/r1")
        assert again is not None and again.new_run_id == "dbos:x/fork"
    finally:
        journal.close()


def test_a_claim_held_by_another_command_is_a_conflict_and_writes_nothing(
        open_one: OpenJournal):
    journal = open_one()
    target = "dbos:x/run-1#i1"
    assert journal.begin(intent("alice-1", target, claim="approve")).status == "new"
    other = journal.begin(intent("bob-1", target, claim="reject", who="bob"))
    assert other.status == "conflict" and other.claim is not None
    assert (other.claim.command_key, other.claim.identity) == ("alice-1", "alice")
    assert journal.command("bob-1", target) is None  # no intent for the loser
    claim = journal.settle(settlement("alice-1", target, "applied", claimed=True))
    assert claim is not None and claim.status == "applied"
    assert journal.begin(intent("carol-1", target, claim="approve")).status == "conflict"
    entries = journal.audit_entries(target_prefix="dbos:x/run-1#")
    assert [(e.command_id, e.outcome) for e in entries] == [("alice-1", "applied")]


def test_a_delivery_that_failed_drops_the_claim_so_a_retry_may_claim_it(open_one: OpenJournal):
    journal = open_one()
    target = "dbos:x/run-1#i1"
    journal.begin(intent("a", target, claim="approve"))
    assert journal.settle(settlement("a", target, "failed", claimed=True)) is None
    assert journal.decision(target) is None
    assert journal.begin(intent("b", target, claim="approve")).status == "new"
    claim = journal.decision(target)
    assert claim is not None and (claim.command_key, claim.status) == ("b", "intent")


def test_a_store_write_joins_the_transaction_of_begin_and_settle(open_one: OpenJournal):
    journal = open_one()
    journal.create_tables(["CREATE TABLE IF NOT EXISTS extra (id {serial_key}, v TEXT)"])
    target = "dbos:x/run-1#i1"

    def failing(tx: JournalTx) -> None:
        tx.execute("INSERT INTO extra (v) VALUES (?)", ("written",))
        raise RuntimeError("the store failed")

    with pytest.raises(RuntimeError):
        journal.begin(intent("a", target, claim="approve"), also=failing)
    # all or nothing: no intent, no claim, no row of the store
    assert journal.command("a", target) is None and journal.decision(target) is None
    with journal.transaction() as tx:
        assert tx.execute("SELECT count(*) FROM extra").fetchone()[0] == 0

    def ok(tx: JournalTx) -> None:
        tx.execute("INSERT INTO extra (v) VALUES (?)", ("with-settle",))

    journal.begin(intent("a", target, claim="approve"))
    journal.settle(settlement("a", target, "applied", claimed=True), also=ok)
    with journal.transaction() as tx:
        assert [r[0] for r in tx.execute("SELECT v FROM extra").fetchall()] == ["with-settle"]


def test_pause_ledger_and_audit_query(open_one: OpenJournal):
    journal = open_one()
    journal.mark_paused("dbos:x/r1", True)
    journal.mark_paused("dbos:x/r1", True)  # again: still one row
    assert journal.is_paused("dbos:x/r1") and not journal.is_paused("dbos:x/r2")
    journal.mark_paused("dbos:x/r1", False)
    assert not journal.is_paused("dbos:x/r1")
    t0 = datetime.now(UTC)
    for i, (who, action) in enumerate([("alice", "pause"), ("bob", "cancel"),
                                        ("alice", "resume")]):
        journal.audit(AuditEntry(at=t0 + timedelta(seconds=i), identity=who, role="operator",
                                 action=action, target=f"dbos:x/r{i}", reason="100% sure",
                                 outcome="applied", plan={"action": action}))
    assert [e.action for e in journal.audit_entries()] == ["resume", "cancel", "pause"]
    assert [e.action for e in journal.audit_entries(identity="alice")] == ["resume", "pause"]
    assert [e.action for e in journal.audit_entries(actions=["cancel"])] == ["cancel"]
    assert [e.action for e in journal.audit_entries(since=t0 + timedelta(seconds=1),
                                                    until=t0 + timedelta(seconds=2))] == ["cancel"]
    assert [e.target for e in journal.audit_entries(target_prefix="dbos:x/r1")] == ["dbos:x/r1"]
    assert journal.audit_entries(limit=1)[0].reason == "100% sure"
    assert journal.audit_entries(limit=1)[0].plan == {"action": "resume"}


def test_approvals_and_obligations_live_in_either_journal(open_one: OpenJournal):
    journal = open_one()
    approvals = ApprovalStore(journal)
    target = "dbos:x/r1#i1"
    command = RecordedCommand(key="alice-1", role="operator", reason="ok", detail="1 of 2")
    assert approvals.record_unless_last(target, "alice", needed=2, kind="approve",
                                        args={"a": 1}, rule="4e", command=lambda _n: command)
    assert not approvals.record_unless_last(
        target, "alice", needed=2, kind="approve", args={"a": 1}, rule="4e",
        command=lambda _n: RecordedCommand("alice-2", "operator", "", ""))
    row = journal.command("alice-1", target)
    assert row is not None and row.status == "recorded"
    grant = approvals.grant(target, "bob", kind="approve", args={"a": 1}, rule="4e")
    assert journal.begin(intent("bob-1", target, claim="approve", who="bob"),
                         also=grant).status == "new"
    assert [a.identity for a in approvals.approvals(target)] == ["alice", "bob"]
    journal.settle(settlement("bob-1", target, "failed", claimed=True, who="bob"),
                   also=approvals.withdrawal(target, "bob"))
    assert [a.identity for a in approvals.approvals(target)] == ["alice"]

    store = ObligationStore(journal)
    now = datetime.now(UTC)
    ob = Obligation(id="ob-1", rule="notify", run_id="dbos:x/r1", what="notify the CISO",
                    created_at=now, due_at=now + timedelta(milliseconds=300), state="open")
    assert store.add(ob) is not None and store.add(ob) is None  # idempotent by id
    assert store.mark_overdue(now + timedelta(seconds=1))[0].id == "ob-1"
    assert store.mark_overdue(now + timedelta(seconds=2)) == []
    closing = store.close_by_operator("ob-1", "waived", by="alice", note="n/a", at=utcnow(),
                                      command={"key": "w-1", "action": "obligation_waive",
                                               "identity": "alice", "role": "operator"})
    assert closing.outcome == "applied"
    assert store.get("ob-1").state == "waived"  # type: ignore[union-attr]
    decision = PolicyDecision(outcome="permit", rules=["r"], winner="r", policy_version="v1")
    assert store.add_decision("dbos:x/r1", "c1", "t", now, decision)
    assert not store.add_decision("dbos:x/r1", "c1", "t", now, decision)
    assert [d["call_id"] for d in store.decisions("dbos:x/r1")] == ["c1"]


def test_unfinished_intents_belong_to_their_live_gateway_and_one_peer_adopts_a_dead_ones(
        open_one: OpenJournal):
    a = open_one("gw-a")
    if a.exclusive:  # SQLite: one gateway per journal, it re-drives every intent
        assert a.begin(intent("k", "dbos:x/r1")).status == "new"
        [row] = a.unfinished()
        assert row.key == "k" and a.adopt(row) and a.adopt(row)
        return
    b, c = open_one("gw-b"), open_one("gw-c")
    for journal in (a, b, c):
        journal.renew_liveness(30)
    a.begin(intent("ka", "dbos:x/r1"))
    b.begin(intent("kb", "dbos:x/r2"))
    assert [r.key for r in a.unfinished()] == ["ka"]
    assert [r.key for r in b.unfinished()] == ["kb"]
    assert b.begin(intent("ka", "dbos:x/r1")).status == "replay"  # keys are global
    [theirs] = b.unfinished()
    assert not c.adopt(a.unfinished()[0])  # a is alive: its intent is not for the taking
    b.retire()  # b stops (or its liveness lapses): a and c both see its intent
    assert [r.key for r in a.unfinished()] == ["ka", "kb"]
    assert [r.key for r in c.unfinished()] == ["kb"]
    assert [c.adopt(theirs), a.adopt(theirs)] == [True, False]  # exactly one re-drives it
    adopted = c.command("kb", "dbos:x/r2")
    assert adopted is not None and (adopted.owner, adopted.attempt) == ("gw-c", 1)
    assert [r.key for r in a.unfinished()] == ["ka"]
    a.renew_liveness(-1)  # lapsed
    assert [r.key for r in c.unfinished()] == ["ka", "kb"]  # oldest first


def test_two_gateways_racing_for_one_interrupt_get_one_claim_and_one_conflict(
        open_one: OpenJournal):
    first = open_one("gw-a")
    if first.exclusive:
        pytest.skip("SQLite: one gateway per journal (the file lock refuses a second)")
    second = open_one("gw-b")
    def decide(journal: JournalStore, key: str, target: str, barrier: threading.Barrier,
               results: dict[str, str]) -> None:
        barrier.wait()
        results[key] = journal.begin(intent(key, target, claim="approve")).status

    for round_ in range(25):
        target = f"dbos:x/r1#i{round_}"
        barrier = threading.Barrier(2)
        results: dict[str, str] = {}
        threads = [threading.Thread(target=decide, args=(j, k, target, barrier, results))
                   for j, k in ((first, "a"), (second, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results.values()) == ["conflict", "new"], results
        claim = first.decision(target)
        assert claim is not None and results[claim.command_key] == "new"


def test_a_database_url_is_shown_without_its_password():
    assert redacted("postgresql://irq:s3cret@db.internal:5433/irq") == \
        "postgresql://irq:***@db.internal:5433/irq"
    assert redacted("postgresql://irq@db/irq") == "postgresql://irq@db/irq"
