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


def _item(env: dict[str, str], run_id: str) -> dict[str, Any] | None:
    out = irq("inbox", "-o", "json", env=env)
    assert out.code == 0, out.stderr
    return next((i for i in json.loads(out.stdout) if i["run_id"] == run_id), None)


def _script(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    content = json.dumps({"calls": [{"name": n, "args": a} for n, a in calls]})
    return {"messages": [{"role": "user", "content": content}]}


def test_native_waits_through_a_real_gateway_breakpoint_and_per_call_decisions(
    gateway: ServedGateway, server: ServerClient
):
    """A static breakpoint is answered with ``irq approve``; a three-call middleware
    interrupt with ``irq decide --call ... --call ... --call ...`` (one resume)."""
    env = gateway.env(gateway.operator)
    email = ("send_email", {"to": "a@x", "body": "hi"})
    bp_tid = server.run_until_interrupted("breakpoint_agent", _script(email))
    bp = eventually(lambda: _item(env, f"langgraph:local/{bp_tid}"), "the breakpoint in irq inbox")
    assert bp["kind"] == "breakpoint" and bp["wait_site"] == "before tools"
    approved = irq("approve", bp["id"], "--yes", "-o", "json", env=env)
    assert approved.code == 0, approved.stdout + approved.stderr
    values = server.wait_status(bp_tid, "idle")["values"]
    assert [m["content"] for m in values["messages"] if m["type"] == "tool"] == ["sent to a@x: hi"]

    mw_tid = server.run_until_interrupted(
        "hitl_agent", _script(email, ("delete_file", {"path": "r.txt"}), ("send_email", {"to": "c@x", "body": "yo"}))
    )
    mw = eventually(lambda: _item(env, f"langgraph:local/{mw_tid}"), "the middleware item in irq inbox")
    assert mw["kind"] == "middleware"
    assert [a["action"] for a in mw["actions"]] == ["send_email", "delete_file", "send_email"]
    refused = irq("decide", mw["id"], "--call", "approve", "--yes", env=env)
    assert refused.code != 0 and len(server.runs(mw_tid)) == 1  # one decision for three calls
    decided = irq(
        "decide", mw["id"], "--call", "approve", "--call", "reject=keep the report",
        "--call", 'edit={"to": "d@x", "body": "edited"}', "--yes", "-o", "json", env=env,
    )
    assert decided.code == 0, decided.stdout + decided.stderr
    assert json.loads(decided.stdout)[0]["outcome"] == "applied"
    messages = server.wait_status(mw_tid, "idle")["values"]["messages"]
    tools = [(m["name"], m["status"], m["content"]) for m in messages if m["type"] == "tool"]
    assert ("send_email", "success", "sent to a@x: hi") in tools
    assert any(n == "delete_file" and s == "error" and "keep the report" in c for n, s, c in tools)
    assert any(c.endswith("sent to d@x: edited") for _, _, c in tools)
    assert len([r for r in server.runs(mw_tid) if (r.get("kwargs") or {}).get("command")]) == 1
