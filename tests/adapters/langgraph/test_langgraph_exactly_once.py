"""Exactly-once decisions through a real gateway to a real Agent Server: a gateway SIGKILLed
between the journaled intent and the outcome delivers once after a restart, and two clients
approving at once deliver once. "Once" is read from the server: the thread's runs (one resume
run) and the value the node recorded."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_scenarios import ServerClient

from backend_adapters.langgraph.dev_server import AgentServer
from console.client import GatewayClient, GatewayUnreachable
from console.model import Decision, DecisionKind
from tests.support.crashable_gateway import CrashableGateway


@pytest.fixture
def gateway(tmp_path: Path, agent_server: AgentServer) -> Iterator[CrashableGateway]:
    home = tmp_path / "irq"
    home.mkdir()
    gw = CrashableGateway(home, agent_server.backend_url(poll=0.3))
    try:
        yield gw
    finally:
        gw.stop()


async def pending(client: GatewayClient, tid: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + tid):
                return intr.id
        await asyncio.wait_for(client.updates(), timeout_s)
    raise AssertionError(f"no pending interrupt for thread {tid}")


def resume_runs(server: ServerClient, tid: str) -> list[dict]:
    return [r for r in server.runs(tid) if (r.get("kwargs") or {}).get("command")]


async def test_gateway_killed_between_intent_and_outcome_delivers_once_after_restart(
    gateway: CrashableGateway, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    gateway.start(crash_at="after_intent")
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        iid = await pending(client, tid)
        with pytest.raises(GatewayUnreachable):
            await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                 key="crash-key-1")
    assert gateway.process is not None
    gateway.process.wait(10)
    assert gateway.process.returncode == -signal.SIGKILL
    # journaled, not sent: the thread still waits and got no resume
    assert resume_runs(server, tid) == []
    assert server.thread(tid)["status"] == "interrupted"

    gateway.start()  # recovery re-drives the journaled intent
    values = server.wait_status(tid, "idle")["values"]
    assert values["response"] == {"type": "accept", "args": None}
    async with GatewayClient(gateway.url, gateway.tokens["admin"]) as client:
        again = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                     key="crash-key-1")
        assert again[0].outcome == "applied" and again[0].replayed
        other = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE))
        assert other[0].outcome == "conflict"
    assert len(resume_runs(server, tid)) == 1


async def test_two_clients_approving_at_once_deliver_one_decision(
    gateway: CrashableGateway, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    gateway.start()
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as a, \
            GatewayClient(gateway.url, gateway.tokens["admin"]) as b:
        iid = await pending(a, tid)
        await pending(b, tid)
        ra, rb = await asyncio.gather(
            a.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE)),
            b.command("decide", [iid], decision=Decision(kind=DecisionKind.REJECT,
                                                          feedback="no")),
        )
    assert sorted([ra[0].outcome, rb[0].outcome]) == ["applied", "conflict"]
    values = server.wait_status(tid, "idle")["values"]
    winner = ra[0] if ra[0].outcome == "applied" else rb[0]
    expected = "accept" if winner.action == "approve" else "response"
    assert values["response"]["type"] == expected
    assert len(resume_runs(server, tid)) == 1
