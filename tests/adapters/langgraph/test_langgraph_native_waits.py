"""Native human waits on a real Agent Server, from graphs that import nothing from irq:

- a static breakpoint (``compile(interrupt_before=["tools"])``, ``interrupt_after=["agent"]``,
  or ``interrupt_before`` given on the run) is a ``waiting`` run with one item of kind
  ``breakpoint``: approve continues, edit writes the state then continues, reject ends the
  thread without running the tools;
- a batched ``HumanInTheLoopMiddleware`` interrupt with three tool calls is one item whose
  ``actions`` are decided one by one (approve one, reject a second, edit a third) and resumes
  the agent once.

What each decision did is checked in the thread itself (its messages, runs and checkpoints,
read through the server's own API); a re-driven decision is not applied twice; bad input is
refused with nothing changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph_scenarios import ServerClient

from backend_adapters.base import Conflict, InvalidInput
from backend_adapters.langgraph.adapter import LangGraphBackend
from console.model import Decision, DecisionKind, Interrupt, InterruptKind, Run, RunState

EMAIL = ("send_email", {"to": "a@x", "body": "hi"})


def agent_input(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    script = {"calls": [{"name": n, "args": a} for n, a in calls]}
    return {"messages": [{"role": "user", "content": json.dumps(script)}]}


def stop_at_breakpoint(server: ServerClient, graph: str, **run: Any) -> str:
    tid = server.new_thread(case="irq-test")
    r = server.http.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": graph, "input": agent_input(EMAIL), **run},
    )
    assert r.status_code == 200, r.text
    assert server.thread(tid)["status"] == "interrupted"
    return tid


async def waiting(adapter: LangGraphBackend, tid: str) -> tuple[Run, Interrupt]:
    observation = await adapter.observe()
    (run,) = [r for r in observation.runs if r.native_id == tid]
    (interrupt,) = [i for i in observation.interrupts if i.run_id == run.id]
    return run, interrupt


def messages(server: ServerClient, tid: str) -> list[dict[str, Any]]:
    return list(server.thread(tid)["values"]["messages"])


def tool_results(server: ServerClient, tid: str) -> list[tuple[str, str, str]]:
    """(tool name, status, content) of every ToolMessage, in order."""
    return [(m["name"], m["status"], m["content"]) for m in messages(server, tid) if m["type"] == "tool"]


def checkpoint(server: ServerClient, tid: str) -> str:
    return str(server.state(tid)["checkpoint"]["checkpoint_id"])


# ------------------------------------------------------------------------- static breakpoints


@pytest.mark.parametrize(
    ("graph", "run", "site"),
    [
        ("breakpoint_agent", {}, "before tools"),
        ("breakpoint_after", {}, "after agent"),
        ("breakpoint_plain", {"interrupt_before": ["tools"]}, "before tools"),
    ],
    ids=["compiled-before", "compiled-after", "on-the-run"],
)
async def test_a_static_breakpoint_is_a_waiting_run_with_one_breakpoint_item(
    adapter: LangGraphBackend, server: ServerClient, graph: str, run: dict[str, Any], site: str
):
    tid = stop_at_breakpoint(server, graph, **run)
    assert server.thread(tid)["interrupts"] == {}  # no interrupt value: only `next` is set
    found, interrupt = await waiting(adapter, tid)
    assert found.state is RunState.WAITING and found.interrupts == [interrupt.id]
    assert not any("stopped outside irq" in w for w in found.warnings)
    assert interrupt.kind is InterruptKind.BREAKPOINT
    assert interrupt.wait_site == site
    assert interrupt.action == "tools"
    assert interrupt.native_id == "bp-" + checkpoint(server, tid)
    assert interrupt.allowed_decisions == [DecisionKind.APPROVE, DecisionKind.EDIT, DecisionKind.REJECT]
    assert "send_email" in interrupt.description and "reject ends the thread" in interrupt.description
    assert interrupt.args["messages"][-1]["tool_calls"][0]["args"] == EMAIL[1]
    assert (await adapter.get_run(tid)).state is RunState.WAITING
    journal = await adapter.journal(tid)
    assert journal[-1].name == "tools" and "static breakpoint" in journal[-1].detail


async def test_breakpoint_approve_runs_the_tools_once(adapter: LangGraphBackend, server: ServerClient):
    tid = stop_at_breakpoint(server, "breakpoint_agent")
    _, interrupt = await waiting(adapter, tid)
    await adapter.decide(interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key=f"k-{tid}", identity="ann")
    server.wait_status(tid, "idle")
    assert tool_results(server, tid) == [("send_email", "success", "sent to a@x: hi")]

    again = await adapter.decide(
        interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key=f"k-{tid}", identity="ann"
    )
    assert again.detail.startswith("already delivered")
    with pytest.raises(Conflict, match="already decided"):
        await adapter.decide(interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key="other", identity="bob")
    assert len(server.runs(tid)) == 2  # the first run and one continue
    assert len(tool_results(server, tid)) == 1
    found, _ = await waiting_or_none(adapter, tid)
    assert found.state is RunState.COMPLETED


async def waiting_or_none(adapter: LangGraphBackend, tid: str) -> tuple[Run, list[Interrupt]]:
    observation = await adapter.observe()
    (run,) = [r for r in observation.runs if r.native_id == tid]
    return run, [i for i in observation.interrupts if i.run_id == run.id]


async def test_breakpoint_edit_updates_the_state_then_runs_the_edited_call_once(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = stop_at_breakpoint(server, "breakpoint_agent")
    _, interrupt = await waiting(adapter, tid)
    values = json.loads(json.dumps(interrupt.args))
    values["messages"][-1]["tool_calls"][0]["args"] = {"to": "b@x", "body": "edited"}
    decision = Decision(kind=DecisionKind.EDIT, args=values)
    await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")
    server.wait_status(tid, "idle")
    assert tool_results(server, tid) == [("send_email", "success", "sent to b@x: edited")]
    history = server.http.post(f"/threads/{tid}/history", json={"limit": 20}).json()
    assert [h["metadata"]["source"] for h in history].count("update") == 1

    again = await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")
    assert again.detail.startswith("already delivered")
    assert len(server.runs(tid)) == 2 and len(tool_results(server, tid)) == 1


async def test_breakpoint_edit_whose_continue_was_lost_is_finished_by_the_redrive_once(
    adapter: LangGraphBackend, server: ServerClient
):
    """A gateway that crashed between the state update and the continue: the re-driven
    decision finds its record and the update on top of the breakpoint, and only continues."""
    tid = stop_at_breakpoint(server, "breakpoint_agent")
    _, interrupt = await waiting(adapter, tid)
    values = json.loads(json.dumps(interrupt.args))
    values["messages"][-1]["tool_calls"][0]["args"] = {"to": "c@x", "body": "later"}
    cp = interrupt.native_id.removeprefix("bp-")
    record = {"checkpoint": cp, "command": f"k-{tid}", "decision": "edit", "by": "ann", "feedback": ""}
    server.http.patch(f"/threads/{tid}", json={"metadata": {"irq_breakpoint": record}})
    assert server.http.post(f"/threads/{tid}/state", json={"values": {"messages": values["messages"]}}).status_code == 200

    decision = Decision(kind=DecisionKind.EDIT, args=values)
    outcome = await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")
    assert "state already updated" in " ".join(outcome.operations)
    server.wait_status(tid, "idle")
    assert tool_results(server, tid) == [("send_email", "success", "sent to c@x: later")]
    history = server.http.post(f"/threads/{tid}/history", json={"limit": 20}).json()
    assert [h["metadata"]["source"] for h in history].count("update") == 1


async def test_breakpoint_reject_ends_the_thread_without_running_the_tools(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = stop_at_breakpoint(server, "breakpoint_agent")
    _, interrupt = await waiting(adapter, tid)
    decision = Decision(kind=DecisionKind.REJECT, feedback="not this customer")
    await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")
    thread = server.thread(tid)
    assert thread["status"] == "idle" and server.state(tid)["next"] == []
    assert tool_results(server, tid) == []
    assert thread["metadata"]["irq_breakpoint"]["feedback"] == "not this customer"
    ended_at = checkpoint(server, tid)

    again = await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")
    assert again.detail.startswith("already delivered")
    assert checkpoint(server, tid) == ended_at and len(server.runs(tid)) == 1
    found, items = await waiting_or_none(adapter, tid)
    assert found.state is RunState.COMPLETED and items == []


async def test_breakpoint_bad_decisions_are_refused_with_nothing_changed(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = stop_at_breakpoint(server, "breakpoint_agent")
    _, interrupt = await waiting(adapter, tid)
    before = checkpoint(server, tid)
    for bad in (
        Decision(kind=DecisionKind.RESPOND, response="yes"),  # a breakpoint takes no answer
        Decision(kind=DecisionKind.EDIT),  # an edit without values
    ):
        with pytest.raises(InvalidInput):
            await adapter.decide(interrupt, bad, idempotency_key=f"k-{tid}", identity="ann")
    assert checkpoint(server, tid) == before and len(server.runs(tid)) == 1
    assert "irq_breakpoint" not in server.thread(tid)["metadata"]

    # continued outside irq: the old stop is gone, and a decision for it sends nothing
    server.http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "breakpoint_agent", "input": None})
    with pytest.raises(Conflict, match="no longer stopped"):
        await adapter.decide(interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key=f"k-{tid}", identity="ann")
    assert len(server.runs(tid)) == 2 and len(tool_results(server, tid)) == 1


# ------------------------------------------------------------- batched middleware interrupt

THREE_CALLS = agent_input(
    ("send_email", {"to": "a@x", "body": "hi"}),
    ("delete_file", {"path": "r.txt"}),
    ("send_email", {"to": "c@x", "body": "yo"}),
)
PER_CALL = Decision(
    kind=DecisionKind.EDIT,
    decisions=[
        Decision(kind=DecisionKind.APPROVE),
        Decision(kind=DecisionKind.REJECT, feedback="keep the report"),
        Decision(kind=DecisionKind.EDIT, args={"to": "d@x", "body": "edited"}),
    ],
)


async def test_a_batched_middleware_interrupt_lists_each_call_with_its_own_decisions(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("hitl_agent", THREE_CALLS)
    run, interrupt = await waiting(adapter, tid)
    assert run.state is RunState.WAITING
    assert interrupt.kind is InterruptKind.MIDDLEWARE
    # the node the middleware asked from, as the thread's own state names it
    assert [t["name"] for t in server.state(tid)["tasks"]] == [interrupt.wait_site.split(":")[0]]
    assert [(a.action, a.args) for a in interrupt.actions] == [
        ("send_email", {"to": "a@x", "body": "hi"}),
        ("delete_file", {"path": "r.txt"}),
        ("send_email", {"to": "c@x", "body": "yo"}),
    ]
    everything = [DecisionKind.APPROVE, DecisionKind.EDIT, DecisionKind.REJECT, DecisionKind.RESPOND]
    assert [a.allowed_decisions for a in interrupt.actions] == [
        everything, [DecisionKind.APPROVE, DecisionKind.REJECT], everything
    ]


async def test_batched_calls_decided_one_by_one_resume_the_agent_once(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("hitl_agent", THREE_CALLS)
    _, interrupt = await waiting(adapter, tid)
    await adapter.decide(interrupt, PER_CALL, idempotency_key=f"k-{tid}", identity="ann")
    server.wait_status(tid, "idle")
    results = {(name, content.rsplit("\n", 1)[-1]): status for name, status, content in tool_results(server, tid)}
    assert results[("send_email", "sent to a@x: hi")] == "success"  # approved: ran as proposed
    assert results[("send_email", "sent to d@x: edited")] == "success"  # edited: ran edited
    (rejected,) = [c for n, s, c in tool_results(server, tid) if n == "delete_file"]
    assert "keep the report" in rejected  # rejected: never ran, the feedback came back
    assert not any("deleted" in c for _, _, c in tool_results(server, tid))
    assert not any("sent to c@x" in c for _, _, c in tool_results(server, tid))

    again = await adapter.decide(interrupt, PER_CALL, idempotency_key=f"k-{tid}", identity="ann")
    assert again.detail.startswith("already delivered")
    assert len(server.runs(tid)) == 2 and len(tool_results(server, tid)) == 3


@pytest.mark.parametrize(
    ("decision", "why"),
    [
        (Decision(kind=DecisionKind.APPROVE), "one decision per call"),
        (Decision(kind=DecisionKind.APPROVE, decisions=PER_CALL.decisions[:2]), "one decision per call"),
        (
            Decision(
                kind=DecisionKind.EDIT,
                decisions=[
                    Decision(kind=DecisionKind.APPROVE),
                    Decision(kind=DecisionKind.EDIT, args={"path": "/etc/passwd"}),
                    Decision(kind=DecisionKind.APPROVE),
                ],
            ),
            "edit is not allowed",
        ),
        (
            Decision(
                kind=DecisionKind.REJECT,
                decisions=[Decision(kind=DecisionKind.REJECT)] * 3,
            ),
            "feedback",
        ),
    ],
    ids=["one-for-all", "too-few", "edit-not-allowed-for-delete_file", "reject-without-feedback"],
)
async def test_bad_per_call_decisions_are_refused_with_nothing_sent(
    adapter: LangGraphBackend, server: ServerClient, decision: Decision, why: str
):
    tid = server.run_until_interrupted("hitl_agent", THREE_CALLS)
    _, interrupt = await waiting(adapter, tid)
    with pytest.raises(InvalidInput, match=why):
        await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")
    assert len(server.runs(tid)) == 1
    assert server.interrupt_ids(tid) == [interrupt.native_id]


async def test_a_single_call_middleware_interrupt_still_takes_one_decision(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("hitl_agent", agent_input(EMAIL))
    _, interrupt = await waiting(adapter, tid)
    assert interrupt.kind is InterruptKind.MIDDLEWARE and interrupt.actions == []
    await adapter.decide(interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key=f"k-{tid}", identity="ann")
    server.wait_status(tid, "idle")
    assert tool_results(server, tid) == [("send_email", "success", "sent to a@x: hi")]
