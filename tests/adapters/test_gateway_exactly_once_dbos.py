"""Exactly-once decisions through the gateway, against real DBOS agents on SQLite.

The gateway runs as a real ``irq serve`` subprocess. One test starts it through the test-only
entry point tests/support/faulty_gateway.py, whose fault hook SIGKILLs it between the journaled
intent and the outcome, and checks that, after a restart as ``irq serve``, the decision reaches
the agent exactly once. "Exactly once" is read from the agent's own record (devtools/dbos_record.py):
once the workflow has settled, its DBOS system database holds one message for it, consumed by
the one ``recv`` that returned it, so a late duplicate cannot hide behind a short sleep.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from test_dbos_adapter import deploy, plan, step

from console.client import GatewayClient, GatewayUnreachable
from console.model import Decision, DecisionKind
from devtools.dbos_record import read_record, settled_record
from tests.support.crashable_gateway import CrashableGateway


@pytest.fixture
def served(tmp_path, dbos_worker):
    home = tmp_path / "irq"
    home.mkdir()
    gw = CrashableGateway(home, f"dbos+sqlite:///{dbos_worker.db}?poll=0.3")
    try:
        yield gw
    finally:
        gw.stop()


async def _pending(client: GatewayClient, wid: str, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + wid):
                return intr.id
        await asyncio.wait_for(client.updates(), timeout_s)
    raise AssertionError(f"no pending interrupt for {wid}")


def _decisions(worker, wid: str) -> list[dict]:
    return [e for e in worker.exec_log(wid) if e["event"] == "decision"]


async def _delivered_once(worker, wid: str) -> dict:
    """Wait for the workflow to finish (the step after the decision ran), then check that the
    agent got exactly one message and one decision; returns what it received."""
    record = await settled_record(worker.db, wid)
    assert record.status == "SUCCESS", record
    assert len(record.sent) == 1 and record.sent[0]["consumed"], record.sent
    assert len(record.received) == 1, record.received
    assert len(_decisions(worker, wid)) == 1, _decisions(worker, wid)
    return record.received[0]


async def _wait_decisions(worker, wid: str, n: int, timeout_s: float = 20) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _decisions(worker, wid)
        if len(found) >= n:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"{wid}: expected {n} decision(s), agent log has {_decisions(worker, wid)}")


async def test_gateway_killed_between_intent_and_outcome_applies_decision_once(served, dbos_worker):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    served.start(crash_at="after_intent")
    async with GatewayClient(served.url, served.tokens["operator"]) as client:
        iid = await _pending(client, wid)
        with pytest.raises(GatewayUnreachable):
            await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                 key="crash-key-1")
    served.process.wait(10)
    assert served.process.returncode == -signal.SIGKILL
    # the gateway (the only sender) is dead and reaped: what it sent is in the agent's record
    before = read_record(dbos_worker.db, wid)
    assert before.sent == [] and before.status == "PENDING", before  # journaled, not sent
    assert _decisions(dbos_worker, wid) == []

    served.start()  # no fault: recovery re-drives the journaled intent
    decided = await _wait_decisions(dbos_worker, wid, 1)
    async with GatewayClient(served.url, served.tokens["admin"]) as client:
        # the same key again: the recorded result, nothing re-sent
        again = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                     key="crash-key-1")
        assert again[0].outcome == "applied" and again[0].replayed
        # another key: a conflict, whoever sends it
        other = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE))
        assert other[0].outcome == "conflict"
        audit = await client.query("audit", limit=20)
    received = await _delivered_once(dbos_worker, wid)
    assert received["type"] == "approve" and decided[0]["type"] == "approve"
    assert any("re-driven after a gateway restart" in a["detail"] for a in audit)


async def test_two_clients_approving_at_once_deliver_one_decision(served, dbos_worker):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    served.start()
    async with GatewayClient(served.url, served.tokens["operator"]) as a, \
            GatewayClient(served.url, served.tokens["admin"]) as b:
        iid = await _pending(a, wid)
        await _pending(b, wid)
        ra, rb = await asyncio.gather(
            a.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE)),
            b.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE)),
        )
    outcomes = sorted([ra[0].outcome, rb[0].outcome])
    assert outcomes == ["applied", "conflict"]
    assert (await _delivered_once(dbos_worker, wid))["type"] == "approve"


async def test_the_same_command_sent_twice_at_once_is_executed_once(served, dbos_worker):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    served.start()
    async with GatewayClient(served.url, served.tokens["operator"]) as a, \
            GatewayClient(served.url, served.tokens["admin"]) as b:
        iid = await _pending(a, wid)
        approve = Decision(kind=DecisionKind.APPROVE)
        ra, rb = await asyncio.gather(
            a.command("decide", [iid], decision=approve, key="same-key"),
            b.command("decide", [iid], decision=approve, key="same-key"),
        )
        results = sorted([ra[0], rb[0]], key=lambda r: r.replayed)
        assert results[0].outcome == "applied" and not results[0].replayed
        assert results[1].replayed and (
            results[1].outcome == "applied" or results[1].error == "in_progress")
        later = await a.command("decide", [iid], decision=approve, key="same-key")
        assert later[0].outcome == "applied" and later[0].replayed
    assert (await _delivered_once(dbos_worker, wid))["type"] == "approve"
