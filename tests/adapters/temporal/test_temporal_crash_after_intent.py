"""A gateway SIGKILLed between the journaled decision intent and the call to Temporal: after a
restart as ``irq serve`` the decision reaches the workflow exactly once.

The Temporal counterpart of tests/adapters/test_gateway_exactly_once_dbos.py: a real dev
server, a real worker running ``ApprovalAgent``, and the gateway as a subprocess started
through tests/support/faulty_gateway.py (``--crash-at after_intent``), then as ``irq
serve``. "Exactly once" is read from the workflow's own history (workflow_history.py): one
accepted ``irq_decide`` update, the workflow's result naming one delivery; a re-sent update
would be a second accepted update there, whatever the workflow did with it.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backend_adapters.temporal.dev_server import DevServer
from console.client import GatewayClient, GatewayUnreachable
from console.model import Decision, DecisionKind
from devtools.temporal_sample_worker import WorkerProcess
from tests.adapters.temporal.workflow_history import accepted_updates, history
from tests.support.crashable_gateway import CrashableGateway

APPROVE = Decision(kind=DecisionKind.APPROVE)


@pytest.fixture
def served(tmp_path: Path, temporal_server: DevServer, task_queue: str
           ) -> Iterator[CrashableGateway]:
    home = tmp_path / "irq"
    home.mkdir()
    gw = CrashableGateway(home, temporal_server.backend_url(
        query=f"TaskQueue='{task_queue}'", poll=0.3))
    try:
        yield gw
    finally:
        gw.stop()


async def _pending(client: GatewayClient, wid: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + wid):
                return intr.id
        try:
            await asyncio.wait_for(client.updates(), max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            break
    raise AssertionError(f"no pending interrupt for {wid}")


async def test_gateway_killed_after_the_intent_delivers_the_decision_once_after_restart(
    served: CrashableGateway, temporal_server: DevServer, task_queue: str,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    start_worker()
    wid = f"crash-{uuid.uuid4().hex[:6]}"
    temporal_server.start_workflow(wid, "ApprovalAgent", task_queue, {
        "interrupts": [{"id": "deploy", "title": "Deploy?", "action": "deploy",
                        "args": {"env": "prod"}, "allowed": ["approve", "reject"]}],
        "linger_s": 1.0,  # open a little longer, so a late second delivery would still land
    })
    served.start(crash_at="after_intent")
    async with GatewayClient(served.url, served.tokens["operator"]) as client:
        iid = await _pending(client, wid)
        with pytest.raises(GatewayUnreachable):
            await client.command("decide", [iid], decision=APPROVE, key="crash-key-1")
    assert served.process is not None
    served.process.wait(10)
    assert served.process.returncode == -signal.SIGKILL
    # the gateway (the only sender) is dead and reaped: nothing reached the workflow
    assert await asyncio.to_thread(accepted_updates, temporal_server, wid) == []

    served.start()  # no fault: recovery re-drives the journaled intent
    close = await asyncio.to_thread(temporal_server.result, wid, 90)
    result = close["workflowExecutionCompletedEventAttributes"]["result"][0]
    (outcome,) = result["outcomes"]
    assert (outcome["interrupt_id"], outcome["kind"]) == ("deploy", "approve")
    assert len(result["delivered"]) == 1, result["delivered"]
    async with GatewayClient(served.url, served.tokens["admin"]) as client:
        deadline = time.monotonic() + 30
        while True:  # the re-drive may still be confirming its delivery: ask again
            again = await client.command("decide", [iid], decision=APPROVE, key="crash-key-1")
            if again[0].error != "in_progress" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert again[0].outcome == "applied" and again[0].replayed, again[0]
        other = await client.command("decide", [iid], decision=APPROVE)
        assert other[0].outcome == "conflict", other[0]
        audit = await client.query("audit", limit=20)
    assert any("re-driven after a gateway restart" in a["detail"] for a in audit), audit
    # the workflow's own history, after everything: one irq_decide update, the re-driven one
    updates = await asyncio.to_thread(accepted_updates, temporal_server, wid)
    assert len(updates) == 1, updates
    assert updates[0]["meta"]["updateId"] == outcome["update_id"], (updates, outcome)
    events = await asyncio.to_thread(history, temporal_server, wid)
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
