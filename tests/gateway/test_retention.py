"""Retention (console/gateway/retention.py) on both journal engines (SQLite and the real
PostgreSQL test server): decided approvals and settled obligations older than the retention
leave the journal; newer ones, outstanding ones and the audit trail stay."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.gateway.approval_store import ApprovalStore
from console.gateway.journal_engines import open_journal
from console.gateway.journal_store import Intent, JournalStore, Settlement
from console.gateway.obligation_store import ObligationStore
from console.gateway.retention import (
    DecidedApprovals,
    Prunable,
    Retention,
    SettledObligations,
)
from console.model import AuditEntry, utcnow
from console.policy.model import Obligation
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture

_databases = itertools.count()
DAY = timedelta(days=1)


@pytest.fixture(params=["sqlite", "postgresql"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    if request.param == "sqlite":
        where: str | Path = tmp_path / "gateway.db"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        name = f"retention_{next(_databases)}"
        with server.connect("postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        where = server.url(name)
    opened = open_journal(where, owner="gw-a")
    yield opened
    opened.close()


def _decide(journal: JournalStore, approvals: ApprovalStore, interrupt_id: str,
            at: datetime) -> None:
    """An approval decided under key ``k-<id>`` (one four-eyes approval with it), dated ``at``."""
    key = f"k-{interrupt_id}"
    grant = approvals.grant(interrupt_id, "alice", kind="approve", args={}, rule="r")
    journal.begin(Intent(key=key, target=interrupt_id, action="approve", identity="alice",
                         role="operator", reason="ok", claim_kind="approve"), also=grant)
    entry = AuditEntry(at=at, identity="alice", role="operator", action="approve",
                       target=interrupt_id, reason="ok", outcome="applied", command_id=key)
    journal.settle(Settlement(key=key, target=interrupt_id, outcome="applied", detail="",
                              error=None, audit=entry, claimed=True))
    when = at.isoformat()
    with journal.transaction() as db:  # dated as if it had happened at ``at``
        db.execute("UPDATE decisions SET at=? WHERE interrupt_id=?", (when, interrupt_id))
        db.execute("UPDATE commands SET created_at=? WHERE key=?", (when, key))
        db.execute("UPDATE approvals SET at=? WHERE interrupt_id=?", (when, interrupt_id))


def _counts(journal: JournalStore, table: str, column: str, value: str) -> int:
    with journal.transaction() as db:
        row = db.execute(f"SELECT COUNT(*) FROM {table} WHERE {column}=?", (value,)).fetchone()
    return int(row[0])


def test_settled_rows_older_than_the_retention_leave_and_newer_ones_and_the_audit_stay(
    journal: JournalStore,
) -> None:
    now = utcnow()
    approvals = ApprovalStore(journal)
    obligations = ObligationStore(journal)
    _decide(journal, approvals, "r/old#1", now - 40 * DAY)
    _decide(journal, approvals, "r/new#1", now - 2 * DAY)
    for ob_id, state, closed in (("old-done", "fulfilled", now - 40 * DAY),
                                 ("old-waived", "waived", now - 31 * DAY),
                                 ("new-done", "fulfilled", now - DAY),
                                 ("old-open", "open", None)):
        obligations.add(Obligation(id=ob_id, rule="r", run_id="r", what="w",
                                   created_at=now - 50 * DAY, state="open"))
        if closed is not None:
            obligations.close_by_operator(
                ob_id, state, by="bob", note="", at=closed,  # type: ignore[arg-type]
                command={"key": f"c-{ob_id}", "action": "fulfil", "identity": "bob",
                         "role": "operator"})
    retention = Retention(timedelta(days=30), [DecidedApprovals(journal),
                                               SettledObligations(journal)], lambda: now)
    assert retention.prune() == 3 + 2  # one claim + approval + command; two obligations

    assert journal.decision("r/old#1") is None
    assert journal.command("k-r/old#1", "r/old#1") is None
    assert _counts(journal, "approvals", "interrupt_id", "r/old#1") == 0
    assert journal.decision("r/new#1") is not None
    assert journal.command("k-r/new#1", "r/new#1") is not None
    assert _counts(journal, "approvals", "interrupt_id", "r/new#1") == 1
    assert obligations.get("old-done") is None and obligations.get("old-waived") is None
    assert obligations.get("new-done") is not None
    assert obligations.get("old-open") is not None  # outstanding: never pruned
    audited = {e.target for e in journal.audit_entries(limit=100)}
    assert {"r/old#1", "r/new#1"} <= audited  # the audit keeps what was decided
    assert retention.prune() == 0  # a second pass (or a peer gateway's) finds nothing left


def test_a_store_that_fails_does_not_stop_the_others() -> None:
    class Broken:
        def prune(self, before: datetime) -> int:
            raise RuntimeError("database blip")

    class Counting:
        def __init__(self) -> None:
            self.cut: datetime | None = None

        def prune(self, before: datetime) -> int:
            self.cut = before
            return 2

    counting = Counting()
    stores: list[Prunable] = [Broken(), counting]
    now = datetime(2026, 3, 1, tzinfo=UTC)
    assert Retention(timedelta(days=30), stores, lambda: now).prune() == 2
    assert counting.cut == now - timedelta(days=30)




def test_the_pause_ledger_says_since_when_each_run_is_paused(journal: JournalStore) -> None:
    from console.gateway.journal import JournalPauseLedger

    ledger = JournalPauseLedger(journal)
    before = utcnow()
    ledger.mark_paused("dbos:local/a", True)
    ledger.mark_paused("dbos:local/b", True)
    ledger.mark_paused("dbos:local/b", False)
    since = ledger.paused_since()
    assert list(since) == ["dbos:local/a"] and since["dbos:local/a"] >= before


def test_cleared_alerts_are_pruned_and_open_ones_stay(journal: JournalStore) -> None:
    from console.alert_model import AlertKind, Condition
    from console.gateway.alert_store import AlertStore

    store = AlertStore(journal)
    now = utcnow()
    old = store.raise_alert(Condition(AlertKind.STALLED, "dbos:x/old", "no progress"),
                            now - 40 * DAY, now - 40 * DAY)
    recent = store.raise_alert(Condition(AlertKind.STALLED, "dbos:x/new", "no progress"),
                               now - 2 * DAY, now - 2 * DAY)
    still_open = store.raise_alert(Condition(AlertKind.GIVEN_UP, "dbos:x/open", "gave up"),
                                   now - 40 * DAY, now - 40 * DAY)
    assert old and recent and still_open
    store.clear(old.id, now - 39 * DAY)
    store.clear(recent.id, now - DAY)
    pruner: Prunable = store  # the retention takes it beside the other stores
    assert pruner.prune(now - 30 * DAY) == 1
    left = {a.id for a in store.listing(include_cleared=True)}
    assert left == {recent.id, still_open.id}
    assert store.prune(now - 30 * DAY) == 0
