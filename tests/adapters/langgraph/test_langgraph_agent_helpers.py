"""irq's LangGraph agent helpers in graphs served by a real Agent Server: interrupts in either
shape with a JSON schema for edits, and a node that declares resources, pushes heartbeats to
a real gateway and releases per policy when irq pauses and cancels it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_scenarios import ServerClient, eventually, start_agent_server

from backend_adapters.base import InvalidInput
from backend_adapters.langgraph.adapter import LangGraphBackend
from backend_adapters.langgraph.agent import inbox_request
from console.model import Decision, DecisionKind
from console.processes import free_port, stop_process
from tests.cli.cli_harness import ServedGateway, irq, start_gateway


async def the_interrupt(adapter: LangGraphBackend, tid: str) -> Any:
    (interrupt,) = [i for i in (await adapter.observe()).interrupts if i.run_id.endswith(tid)]
    return interrupt


def test_a_broken_args_schema_is_refused_when_the_interrupt_is_raised():
    with pytest.raises(ValueError, match="args_schema"):
        inbox_request("x", {}, args_schema={"type": "no-such-type"})


async def test_ask_raises_an_inbox_interrupt_whose_schema_guards_edits(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("helper_ask", {})
    interrupt = await the_interrupt(adapter, tid)
    assert interrupt.action == "send_email" and interrupt.title == "Send this email?"
    assert interrupt.args_schema and interrupt.args_schema["properties"]["to"]["format"] == "email"
    # reject travels as the Agent Inbox "response" (the shape has no reject of its own)
    assert {d.value for d in interrupt.allowed_decisions} >= {"approve", "edit", "reject"}

    with pytest.raises(InvalidInput, match=r"args\.to"):
        await adapter.decide(
            interrupt,
            Decision(kind=DecisionKind.EDIT, args={"to": "nobody", "body": "x"}),
            idempotency_key=f"bad-{tid}",
            identity="ann",
        )
    edited = {"to": "bob@example.com", "body": "hello"}
    await adapter.decide(
        interrupt, Decision(kind=DecisionKind.EDIT, args=edited), idempotency_key=f"k-{tid}",
        identity="ann",
    )
    reply = server.wait_status(tid, "idle")["values"]["reply"]
    assert reply == {"kind": "edit", "args": edited, "text": None}


async def test_review_tools_gets_one_reply_per_call_from_one_command(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("helper_review", {})
    interrupt = await the_interrupt(adapter, tid)
    assert interrupt.allowed_decisions == [DecisionKind.APPROVE, DecisionKind.REJECT]
    # several calls: one decision per call, in one command (a single one for all is refused)
    per_call = [Decision(kind=DecisionKind.REJECT, feedback="later")] * len(interrupt.actions)
    await adapter.decide(
        interrupt, Decision(kind=DecisionKind.REJECT, feedback="later", decisions=per_call),
        idempotency_key=f"k-{tid}", identity="ann",
    )
    replies = server.wait_status(tid, "idle")["values"]["replies"]
    assert [(r["kind"], r["text"]) for r in replies] == [("reject", "later"), ("reject", "later")]


# ----------------------------------------------------------- heartbeats and resources


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ServedGateway, ServerClient]]:
    """A gateway observing an Agent Server whose graphs push heartbeats to it."""
    from console.gateway.auth import create_token
    from console.model import Role

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IRQ_HOME", str(home))
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    agent_token = create_token(Role.AGENT, "langgraph-agents", home, scopes=["langgraph:local"])
    gateway_port, server_port = free_port(), free_port()
    gateway = start_gateway(
        home, [f"langgraph+http://127.0.0.1:{server_port}?poll=0.3"], port=gateway_port
    )
    server = None
    try:
        server = start_agent_server(
            tmp_path / "server",
            port=server_port,
            env={
                "IRQ_AGENT_URL": f"ws://127.0.0.1:{gateway_port}/agent",
                "IRQ_AGENT_TOKEN": agent_token,
                "IRQ_AGENT_CONTEXT": "local",
            },
        )
        client = ServerClient(server.url)
        yield gateway, client
        client.close()
    finally:
        if server is not None:
            server.stop()
        stop_process(gateway.process)


def test_a_node_with_agent_run_beats_reports_resources_and_releases_per_policy(
    fleet: tuple[ServedGateway, ServerClient],
):
    gateway, server = fleet
    env = gateway.env(gateway.operator)
    tid = server.start("helper_work", {"steps": 150})
    run_id = f"langgraph:local/{tid}"

    def run() -> dict[str, Any]:
        runs = json.loads(irq("runs", "-o", "json", env=env).stdout)
        return next((r for r in runs if r["id"] == run_id), {})

    def states() -> dict[str, str]:
        return {r["id"]: r["state"] for r in run().get("resources", [])}

    beating = eventually(
        lambda: (r := run()).get("heartbeat_age_s") is not None and r.get("progress") and r,
        "a heartbeat with progress from the node",
    )
    assert beating["state"] == "running"
    assert beating["heartbeat_timeout_s"] == 5
    assert states() == {"gpu-0": "held", "lock/ledger": "held"}
    assert not any("no heartbeat timeout" in w for w in beating["warnings"])

    paused = irq("pause", run_id, "--yes", "--reason", "maintenance", "-o", "json", env=env)
    assert paused.code == 0, paused.stdout + paused.stderr
    # the sync node notices (stop_requested), keeps the GPU, releases the lock, reports it
    eventually(lambda: run().get("state") == "paused", "the run to be paused")
    eventually(lambda: states() == {"gpu-0": "held", "lock/ledger": "released"},
               "the lock released and the GPU kept")
    assert server.thread(tid)["status"] == "interrupted"

    resumed = irq("resume", run_id, "--yes", "-o", "json", env=env)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    eventually(lambda: states() == {"gpu-0": "held", "lock/ledger": "held"},
               "the node to run again and take the lock")

    cancelled = irq("cancel", run_id, "--yes", "-o", "json", env=env)
    assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
    eventually(lambda: states() == {"gpu-0": "released", "lock/ledger": "released"},
               "everything released on cancel")
    eventually(lambda: run().get("state") == "cancelled", "the run to be cancelled")
