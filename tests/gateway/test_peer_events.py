"""Events between gateways (console/gateway/peer_events.py, peering.py) against a real
PostgreSQL server (the ``pgserver`` wheel), each test on a fresh database: two real hubs, each
with its own journal connection and lease keeper, as two gateways have them. The batches are
flushed, written, read and applied by the test, one step at a time."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from console.gateway.agent_beats import Reporter
from console.gateway.context_leases import ContextLeases
from console.gateway.journal_store import JournalStore
from console.gateway.peer_events import PeerEvents
from console.gateway.peering import PeerHub, Peering
from console.gateway.protocol import AgentHeartbeat
from console.model import BackendHealth, Interrupt, Run, utcnow
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import OpenJournal
from tests.gateway.pg_journals import pg_journal as pg_journal  # the fixture

CONTEXTS = ["dbos:one", "dbos:two"]
_databases = itertools.count()
CREATED = utcnow()


@dataclass
class Side:
    """One gateway's parts: hub, journal, leases, peering."""

    hub: PeerHub
    journal: JournalStore
    leases: ContextLeases
    peering: Peering
    notified: list[dict]

    def send(self) -> int | None:
        batch = self.peering.flush()
        if batch is None:
            return None
        assert self.peering.events is not None
        return self.peering.events.write(*batch)

    def receive(self) -> int:
        assert self.peering.events is not None
        rows = self.peering.events.read_since(self.peering.cursor)
        for row in rows:
            self.peering.apply(row)
        return len(rows)


Opener = Callable[[str], Side]


@pytest.fixture
def side(pg_journal: OpenJournal) -> Opener:
    def open_side(holder: str) -> Side:
        journal = pg_journal(holder)
        hub = PeerHub()
        leases = ContextLeases(journal, holder, CONTEXTS)
        peering = Peering(hub, journal, leases, decided=journal.decision)
        notified: list[dict] = []
        hub.listeners.append(lambda e: notified.append(e) if peering.notifies(e) else None)
        return Side(hub, journal, leases, peering, notified)

    return open_side


def run(native: str, context: str = "one", **extra: object) -> Run:
    return Run(id=f"dbos:{context}/{native}", backend="dbos", context=context,
               native_id=native, name=native, updated_at=CREATED,
               **extra)  # type: ignore[arg-type]


def interrupt(native: str, context: str = "one") -> Interrupt:
    return Interrupt(id=f"dbos:{context}/{native}#i1", run_id=f"dbos:{context}/{native}",
                     native_id="i1", title="Deploy?", created_at=CREATED)


def beat(native: str, seq: int, context: str = "one") -> AgentHeartbeat:
    return AgentHeartbeat(type="heartbeat", backend="dbos", context=context, native_id=native,
                          seq=seq, at=utcnow(), interval_s=1.0, timeout_s=5.0, progress=0.5)


def two(side: Opener) -> tuple[Side, Side]:
    a, b = side("gw-a"), side("gw-b")
    a.leases.renew()  # A alone: both contexts
    b.leases.renew()
    a.receive()
    b.receive()
    return a, b


def test_rows_are_read_in_seq_order_after_a_cursor(side: Opener) -> None:
    a = side("gw-a")
    events = PeerEvents(a.journal, "gw-a")
    seqs = [events.write("batch", [{"k": "noop", "n": n}]) for n in range(5)]
    assert seqs == sorted(seqs)
    rows = events.read_since(seqs[1])
    assert [r.seq for r in rows] == seqs[2:] and rows[0].payload == [{"k": "noop", "n": 2}]
    assert events.bounds() == (seqs[0], seqs[-1])
    assert events.prune(keep_s=0.0) == 5 and events.read_since(0) == []


def test_a_large_batch_is_split_over_rows_and_read_back_whole(side: Opener) -> None:
    from console.gateway import peer_events

    a = side("gw-a")
    events = PeerEvents(a.journal, "gw-a")
    items = [{"k": "noop", "pad": "x" * 1000, "n": n} for n in range(3000)]  # ~3 MB
    last = events.write("batch", items)
    rows = events.read_since(0)
    assert len(rows) >= 3 and rows[-1].seq == last
    assert all(len(str(r.payload)) < 2 * peer_events.ROW_BYTES for r in rows)
    assert [i["n"] for r in rows for i in r.payload] == list(range(3000))


def test_the_holders_observations_and_an_agents_beats_reach_the_other_hub(side: Opener) -> None:
    a, b = two(side)
    assert a.leases.held == set(CONTEXTS) and b.leases.held == set()
    a.hub.observe_runs([run("wf-1")])
    a.peering.observed("dbos:one", [run("wf-1")], [], [interrupt("wf-1")], True)
    a.peering.health("dbos:one", BackendHealth(backend="dbos", context="one", url="x",
                                               reachable=True, last_ok_at=utcnow()))
    # the agent pushes to A
    a.hub.agent_heartbeat("dbos:one/wf-1", beat("wf-1", 1), Reporter("tok-1", "agent-one"))
    assert a.send() is not None
    assert b.receive() >= 1
    seen = b.hub.runs["dbos:one/wf-1"]
    assert seen.heartbeat_at is None  # beats merge at the next coalescing flush, as local ones
    b.hub.flush_heartbeats()
    seen = b.hub.runs["dbos:one/wf-1"]
    assert seen.heartbeat_at is not None and seen.progress == 0.5
    assert b.hub.bound_to("dbos:one/wf-1") == Reporter("tok-1", "agent-one")
    assert [i.id for i in b.hub.interrupts.values()] == ["dbos:one/wf-1#i1"]
    assert b.hub.backends["dbos:one"].reachable
    # an unchanged poll sends nothing again
    a.peering.observed("dbos:one", [run("wf-1")], [], [interrupt("wf-1")], True)
    assert a.peering.flush() is None
    # a run gone at the backend goes on B too
    a.peering.observed("dbos:one", [], ["dbos:one/wf-1"], [], True)
    a.send()
    b.receive()
    assert "dbos:one/wf-1" not in b.hub.runs


def test_nothing_applied_from_a_peer_is_sent_back_and_a_holder_ignores_peers_observations(
        side: Opener) -> None:
    a, b = two(side)
    a.hub.agent_heartbeat("dbos:one/wf-2", beat("wf-2", 1))
    a.hub.publish("notice", {"level": "info", "run_id": "dbos:one/wf-2", "message": "hi"})
    a.send()
    b.receive()
    assert b.peering.flush() is None  # no echo
    # B sends an observation of a context A holds: A keeps its own view
    b.peering.observed("dbos:one", [run("wf-x")], [], [], True)
    b.send()
    a.receive()
    assert "dbos:one/wf-x" not in a.hub.runs


def test_notifications_fire_only_on_the_gateway_holding_the_context(side: Opener) -> None:
    a, b = two(side)
    # a notice raised on B (say a release check of a pause executed there) about A's context
    b.hub.publish("notice", {"level": "warning", "run_id": "dbos:one/wf-3",
                             "message": "suspected leak"})
    assert not [e for e in b.notified if e["kind"] == "notice"]
    b.send()
    a.receive()
    assert [e["data"]["message"] for e in a.notified if e["kind"] == "notice"] == [
        "suspected leak"]
    # and one raised on A goes to B's clients, not to B's webhooks
    a.hub.publish("notice", {"level": "warning", "run_id": "dbos:one/wf-3", "message": "late"})
    a.send()
    b.receive()
    assert [e["data"]["message"] for e in b.hub.log if e["kind"] == "notice"][-1] == "late"
    assert not [e for e in b.notified if e["kind"] == "notice"]


def test_a_joining_gateway_catches_up_from_the_peers_current_state(side: Opener) -> None:
    a = side("gw-a")
    a.leases.renew()
    a.peering.observed("dbos:one", [run("wf-4"), run("wf-5")], [], [interrupt("wf-4")], True)
    a.hub.observe_runs([run("wf-4"), run("wf-5")])
    a.hub.agent_heartbeat("dbos:one/wf-4", beat("wf-4", 7), Reporter("tok-1", "agent-one"))
    a.send()  # long before B exists
    b = side("gw-b")  # B starts: reads only what comes after it, asks for state
    assert b.peering.events is not None
    _oldest, b.peering.cursor = b.peering.events.bounds()
    b.peering.events.write("join", {})
    a.receive()  # A sees the join and answers with its state in the next batch
    a.send()
    b.receive()
    b.hub.flush_heartbeats()
    assert {"dbos:one/wf-4", "dbos:one/wf-5"} <= set(b.hub.runs)
    assert b.hub.runs["dbos:one/wf-4"].heartbeat_at is not None
    assert "dbos:one/wf-4#i1" in b.hub.interrupts


def test_a_decision_applied_on_one_gateway_shows_decided_on_the_other(side: Opener) -> None:
    from console.gateway.journal_store import Intent, Settlement
    from console.model import AuditEntry

    a, b = two(side)
    intr = interrupt("wf-6")
    a.peering.observed("dbos:one", [run("wf-6")], [], [intr], True)
    a.hub.observe_runs([run("wf-6")])
    a.send()
    b.receive()
    assert b.hub.interrupts[intr.id].status == "pending"
    b.journal.begin(Intent(key="k1", target=intr.id, action="approve", identity="bob",
                           role="operator", reason="", claim_kind="approve"))
    claim = b.journal.settle(Settlement(
        key="k1", target=intr.id, outcome="applied", detail="", error=None, claimed=True,
        audit=AuditEntry(at=utcnow(), identity="bob", role="operator", action="approve",
                         target=intr.id, reason="", outcome="applied", command_id="k1")))
    b.hub.mark_decided(intr.id, claim)
    a.hub.observe_interrupts("dbos:one", [intr], True, lambda _i: None)
    b.send()
    a.receive()
    assert a.hub.interrupts[intr.id].status == "decided"
    assert a.hub.interrupts[intr.id].decision is not None
    assert utcnow() - a.hub.interrupts[intr.id].decision.at < timedelta(minutes=1)
