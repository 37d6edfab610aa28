"""End to end: a plain LangGraph graph (no irq imports) served by ``langgraph dev`` shows up in
``irq inbox`` of a real ``irq serve --backend langgraph+http://...``, and ``irq approve --yes``
reaches the node exactly once (checked in the thread's own state)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_scenarios import ServerClient, eventually

from backend_adapters.langgraph.dev_server import AgentServer
from console.processes import stop_process
from tests.cli.cli_harness import INTERRUPT_FIELDS, RUN_FIELDS, ServedGateway, irq, start_gateway


@pytest.fixture
def gateway(
    agent_server: AgentServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServedGateway]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IRQ_HOME", str(home))
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    served = start_gateway(home, [agent_server.backend_url(poll=0.3)])
    try:
        yield served
    finally:
        stop_process(served.process)


def test_irq_inbox_and_approve_through_a_real_gateway(gateway: ServedGateway, server: ServerClient):
    tid = server.run_until_interrupted("inbox", {"allow": {"edit": False}})
    run_id = f"langgraph:local/{tid}"
    env = gateway.env(gateway.operator)

    def item() -> dict[str, Any] | None:
        out = irq("inbox", "-o", "json", env=env)
        assert out.code == 0, out.stderr
        return next((i for i in json.loads(out.stdout) if i["run_id"] == run_id), None)

    interrupt = eventually(item, "the LangGraph interrupt in irq inbox")
    assert INTERRUPT_FIELDS <= interrupt.keys()
    assert interrupt["title"] == "Send this email?"
    assert interrupt["action"] == "send_email"
    assert set(interrupt["allowed_decisions"]) == {"approve", "reject", "respond"}

    runs = json.loads(irq("runs", "-o", "json", env=env).stdout)
    run = next(r for r in runs if r["id"] == run_id)
    assert RUN_FIELDS <= run.keys()
    assert run["state"] == "waiting" and run["interrupts"] == [interrupt["id"]]
    assert any("in-memory checkpointer" in w for w in run["warnings"])

    refused = irq("edit", interrupt["id"], "--args", '{"to": "x@example.com"}', "--yes", env=env)
    assert refused.code == 2, refused.stdout + refused.stderr  # edit is not offered here

    approved = irq("approve", interrupt["id"], "--yes", "--reason", "looks fine", "-o", "json", env=env)
    assert approved.code == 0, approved.stdout + approved.stderr
    assert json.loads(approved.stdout)[0]["outcome"] == "applied"
    again = irq("approve", interrupt["id"], "--yes", "-o", "json", env=env)
    assert again.code == 4, again.stdout + again.stderr

    values = server.wait_status(tid, "idle")["values"]
    assert values["response"] == {"type": "accept", "args": None}
    resumes = [r for r in server.runs(tid) if (r.get("kwargs") or {}).get("command")]
    assert len(resumes) == 1
    eventually(
        lambda: next(
            (r["state"] == "completed" for r in json.loads(irq("runs", "-o", "json", env=env).stdout)
             if r["id"] == run_id),
            False,
        ),
        "irq runs to show the thread completed",
    )
