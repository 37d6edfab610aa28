"""Every decision shape against a real Agent Server: what each irq decision delivers to a plain
LangGraph node (Agent Inbox ``HumanInterrupt``) and to a langchain agent with
``HumanInTheLoopMiddleware``, checked in the thread's own state through the server's API;
refusals before anything is sent; exactly-once per interrupt id."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph_scenarios import ServerClient

from backend_adapters.base import Conflict, InvalidInput, NotFound
from backend_adapters.langgraph.adapter import LangGraphBackend
from console.model import Decision, DecisionKind, Interrupt, RunState

DRAFT = {"to": "alice@example.com", "body": "hi"}


async def pending(adapter: LangGraphBackend, tid: str) -> list[Interrupt]:
    observation = await adapter.observe()
    return [i for i in observation.interrupts if i.run_id.endswith("/" + tid)]


async def the_interrupt(adapter: LangGraphBackend, tid: str) -> Interrupt:
    (interrupt,) = await pending(adapter, tid)
    return interrupt


def agent_input(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    script = {"calls": [{"name": n, "args": a} for n, a in calls]}
    return {"messages": [{"role": "user", "content": json.dumps(script)}]}


def tool_messages(server: ServerClient, tid: str) -> dict[str, tuple[str, str]]:
    """tool name -> (status, content) of the ToolMessages the agent received."""
    messages = server.thread(tid)["values"]["messages"]
    return {m["name"]: (m["status"], m["content"]) for m in messages if m["type"] == "tool"}


# ------------------------------------------------------------------------------ Agent Inbox


@pytest.mark.parametrize(
    ("decision", "received"),
    [
        (Decision(kind=DecisionKind.APPROVE), {"type": "accept", "args": None}),
        (
            Decision(kind=DecisionKind.EDIT, args={"to": "bob@example.com", "body": "hello"}),
            {
                "type": "edit",
                "args": {"action": "send_email", "args": {"to": "bob@example.com", "body": "hello"}},
            },
        ),
        # an edit that changes nothing is sent as accept (as the Agent Inbox does)
        (Decision(kind=DecisionKind.EDIT, args=DRAFT), {"type": "accept", "args": None}),
        (
            Decision(kind=DecisionKind.REJECT, feedback="too formal"),
            {"type": "response", "args": "too formal"},
        ),
        (Decision(kind=DecisionKind.REJECT), {"type": "ignore", "args": None}),
        (
            Decision(kind=DecisionKind.RESPOND, response="use the other address"),
            {"type": "response", "args": "use the other address"},
        ),
    ],
    ids=["approve", "edit", "edit-unchanged", "reject-feedback", "reject-ignore", "respond"],
)
async def test_agent_inbox_decision_reaches_the_node_as_a_human_response(
    adapter: LangGraphBackend, server: ServerClient, decision: Decision, received: dict[str, Any]
):
    tid = server.run_until_interrupted("inbox", {})
    interrupt = await the_interrupt(adapter, tid)
    assert interrupt.action == "send_email" and interrupt.args == DRAFT
    assert interrupt.title == "Send this email?"
    assert set(interrupt.allowed_decisions) == set(DecisionKind)

    outcome = await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")

    assert interrupt.native_id in outcome.detail
    assert outcome.detail.endswith("the run completed")  # followed on the run's SSE stream
    values = server.wait_status(tid, "idle")["values"]
    assert values["response"] == received
    assert values["log"] == ["draft", "review", "act"]


@pytest.mark.parametrize(
    ("allow", "allowed", "refused"),
    [
        ({"edit": False}, {"approve", "reject", "respond"}, DecisionKind.EDIT),
        ({"respond": False, "ignore": False}, {"approve", "edit"}, DecisionKind.REJECT),
        ({"respond": False}, {"approve", "edit", "reject"}, DecisionKind.RESPOND),
    ],
    ids=["no-edit", "no-reject", "no-respond"],
)
async def test_a_decision_the_inbox_config_does_not_allow_is_refused_before_anything_is_sent(
    adapter: LangGraphBackend,
    server: ServerClient,
    allow: dict[str, bool],
    allowed: set[str],
    refused: DecisionKind,
):
    tid = server.run_until_interrupted("inbox", {"allow": allow})
    interrupt = await the_interrupt(adapter, tid)
    assert {d.value for d in interrupt.allowed_decisions} == allowed
    runs_before = len(server.runs(tid))

    with pytest.raises(InvalidInput, match="not allowed"):
        await adapter.decide(
            interrupt,
            Decision(kind=refused, args={"to": "x@example.com", "body": "x"}, response="x"),
            idempotency_key=f"k-{tid}",
            identity="ann",
        )

    assert len(server.runs(tid)) == runs_before  # no resume was sent
    assert server.interrupt_ids(tid) == [interrupt.native_id]


async def test_an_edit_that_breaks_the_args_schema_is_refused_before_anything_is_sent(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    interrupt = await the_interrupt(adapter, tid)
    schema = {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}
    strict = interrupt.model_copy(update={"args_schema": schema})

    with pytest.raises(InvalidInput, match=r"args\.to"):
        await adapter.decide(
            strict,
            Decision(kind=DecisionKind.EDIT, args={"to": "not-an-address", "body": "x"}),
            idempotency_key=f"k-{tid}",
            identity="ann",
        )
    assert len(server.runs(tid)) == 1


# ---------------------------------------------------------------- HumanInTheLoopMiddleware


@pytest.mark.parametrize(
    ("decision", "status", "content"),
    [
        (Decision(kind=DecisionKind.APPROVE), "success", "sent to a@x: hi"),
        (Decision(kind=DecisionKind.EDIT, args={"to": "b@x", "body": "yo"}), "success", "sent to b@x: yo"),
        (Decision(kind=DecisionKind.REJECT, feedback="not today"), "error", "not today"),
        (Decision(kind=DecisionKind.RESPOND, response="I sent it myself"), "success", "I sent it myself"),
    ],
    ids=["approve", "edit", "reject", "respond"],
)
async def test_middleware_decision_reaches_the_agent_as_its_tool_result(
    adapter: LangGraphBackend, server: ServerClient, decision: Decision, status: str, content: str
):
    tid = server.run_until_interrupted("hitl_agent", agent_input(("send_email", {"to": "a@x", "body": "hi"})))
    interrupt = await the_interrupt(adapter, tid)
    assert interrupt.action == "send_email" and interrupt.args == {"to": "a@x", "body": "hi"}
    assert set(interrupt.allowed_decisions) == set(DecisionKind)

    await adapter.decide(interrupt, decision, idempotency_key=f"k-{tid}", identity="ann")

    server.wait_status(tid, "idle")
    got_status, got_content = tool_messages(server, tid)["send_email"]
    assert got_status == status
    assert content in got_content
    if decision.kind is DecisionKind.RESPOND:
        assert got_content == content  # the tool did not run: the answer is its result


async def test_middleware_allowed_decisions_come_from_the_review_config(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("hitl_agent", agent_input(("delete_file", {"path": "r.txt"})))
    interrupt = await the_interrupt(adapter, tid)
    assert interrupt.allowed_decisions == [DecisionKind.APPROVE, DecisionKind.REJECT]
    for refused in (
        Decision(kind=DecisionKind.EDIT, args={"path": "other.txt"}),
        Decision(kind=DecisionKind.RESPOND, response="no"),
    ):
        with pytest.raises(InvalidInput):
            await adapter.decide(interrupt, refused, idempotency_key=f"k-{tid}", identity="ann")
    assert len(server.runs(tid)) == 1

    await adapter.decide(
        interrupt, Decision(kind=DecisionKind.REJECT), idempotency_key=f"k2-{tid}", identity="ann"
    )
    server.wait_status(tid, "idle")
    assert tool_messages(server, tid)["delete_file"][0] == "error"


TWO_CALLS = agent_input(("send_email", {"to": "a@x", "body": "hi"}), ("delete_file", {"path": "r.txt"}))


async def test_middleware_interrupt_with_two_calls_is_one_item_decided_call_by_call(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("hitl_agent", TWO_CALLS)
    interrupt = await the_interrupt(adapter, tid)  # one inbox item for the two calls
    assert interrupt.action == "send_email + delete_file"
    # what some call allows; each call is checked against its own list
    assert interrupt.allowed_decisions == list(DecisionKind)
    assert [a.action for a in interrupt.actions] == ["send_email", "delete_file"]
    calls = interrupt.args["calls"]
    assert [c["name"] for c in calls] == ["send_email", "delete_file"]

    per_call = [
        Decision(kind=DecisionKind.EDIT, args={"to": "b@x", "body": "yo"}),
        Decision(kind=DecisionKind.APPROVE),
    ]
    await adapter.decide(
        interrupt,
        Decision(kind=DecisionKind.EDIT, decisions=per_call),
        idempotency_key=f"k-{tid}",
        identity="ann",
    )

    server.wait_status(tid, "idle")
    tools = tool_messages(server, tid)
    assert tools["send_email"][0] == "success" and "sent to b@x: yo" in tools["send_email"][1]
    assert tools["delete_file"] == ("success", "deleted r.txt")


async def test_middleware_two_calls_edit_of_a_call_that_may_not_be_edited_is_refused(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("hitl_agent", TWO_CALLS)
    interrupt = await the_interrupt(adapter, tid)
    edited = [Decision(kind=DecisionKind.APPROVE), Decision(kind=DecisionKind.EDIT, args={"path": "/etc/passwd"})]
    with pytest.raises(InvalidInput, match="edit is not allowed"):
        await adapter.decide(
            interrupt, Decision(kind=DecisionKind.EDIT, decisions=edited), idempotency_key=f"k-{tid}", identity="ann"
        )
    short = [Decision(kind=DecisionKind.APPROVE)]  # a partial list is never sent
    with pytest.raises(InvalidInput):
        await adapter.decide(
            interrupt, Decision(kind=DecisionKind.APPROVE, decisions=short), idempotency_key=f"k-{tid}", identity="ann"
        )
    assert len(server.runs(tid)) == 1


async def test_middleware_two_calls_rejected_call_by_call_reject_both(adapter: LangGraphBackend, server: ServerClient):
    tid = server.run_until_interrupted("hitl_agent", TWO_CALLS)
    interrupt = await the_interrupt(adapter, tid)
    both = [Decision(kind=DecisionKind.REJECT, feedback="stop")] * 2
    await adapter.decide(
        interrupt, Decision(kind=DecisionKind.REJECT, feedback="stop", decisions=both),
        idempotency_key=f"k-{tid}", identity="ann"
    )
    server.wait_status(tid, "idle")
    tools = tool_messages(server, tid)
    assert tools["send_email"][0] == tools["delete_file"][0] == "error"
    assert "stop" in tools["send_email"][1] and "stop" in tools["delete_file"][1]


# ----------------------------------------------------------------------- arbitrary values


async def test_an_interrupt_with_any_other_value_is_answered_with_respond_only(
    adapter: LangGraphBackend, server: ServerClient
):
    question = {"question": "Which account?", "options": ["acme", "globex"]}
    tid = server.run_until_interrupted("any_value", {"question": question})
    interrupt = await the_interrupt(adapter, tid)
    assert interrupt.allowed_decisions == [DecisionKind.RESPOND]
    assert interrupt.title == "Which account?"
    assert json.loads(interrupt.description) == question
    with pytest.raises(InvalidInput):
        await adapter.decide(
            interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key=f"k-{tid}", identity="ann"
        )

    answer = {"account": "acme"}
    await adapter.decide(
        interrupt, Decision(kind=DecisionKind.RESPOND, response=answer), idempotency_key=f"k2-{tid}", identity="ann"
    )
    assert server.wait_status(tid, "idle")["values"]["answer"] == answer


# -------------------------------------------------------------------------- exactly once


async def test_two_interrupts_on_one_thread_are_two_items_decided_separately(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("two_interrupts", {})
    items = await pending(adapter, tid)
    assert sorted(i.action for i in items) == ["left", "right"]
    assert len({i.native_id for i in items}) == 2
    left = next(i for i in items if i.action == "left")
    right = next(i for i in items if i.action == "right")

    await adapter.decide(left, Decision(kind=DecisionKind.APPROVE), idempotency_key="k-left", identity="ann")
    # decided right after: the adapter waits for the first resume to settle, the other stays
    await adapter.decide(
        right, Decision(kind=DecisionKind.REJECT, feedback="no"), idempotency_key="k-right", identity="bob"
    )

    answers = server.wait_status(tid, "idle")["values"]["answers"]
    assert sorted(answers, key=lambda a: a["node"]) == [
        {"node": "left", "response": {"type": "accept", "args": None}},
        {"node": "right", "response": {"type": "response", "args": "no"}},
    ]
    steps = await adapter.journal(tid)
    details = {s.name: s.detail for s in steps}
    assert "received approve by ann" in details["left"]
    assert "received reject by bob" in details["right"]


async def test_the_same_approval_twice_delivers_once(adapter: LangGraphBackend, server: ServerClient):
    tid = server.run_until_interrupted("inbox", {})
    interrupt = await the_interrupt(adapter, tid)
    approve = Decision(kind=DecisionKind.APPROVE)
    await adapter.decide(interrupt, approve, idempotency_key="first", identity="ann")

    with pytest.raises(Conflict, match="already decided \\(approve by ann\\)"):
        await adapter.decide(interrupt, approve, idempotency_key="second", identity="bob")
    # the same command again (a gateway re-driving its intent after a crash): not re-sent
    again = await adapter.decide(interrupt, approve, idempotency_key="first", identity="ann")
    assert again.detail.startswith("already delivered")

    server.wait_status(tid, "idle")
    resumes = [r for r in server.runs(tid) if (r.get("kwargs") or {}).get("command")]
    assert len(resumes) == 1


async def test_a_stale_interrupt_id_is_a_clear_not_found(adapter: LangGraphBackend, server: ServerClient):
    tid = server.run_until_interrupted("inbox", {})
    interrupt = await the_interrupt(adapter, tid)
    stale = interrupt.model_copy(update={"native_id": "0" * 32, "id": interrupt.run_id + "#" + "0" * 32})
    with pytest.raises(NotFound, match="stale interrupt id 0{32}.*pending now: " + interrupt.native_id):
        await adapter.decide(stale, Decision(kind=DecisionKind.APPROVE), idempotency_key="k", identity="ann")
    assert len(server.runs(tid)) == 1


async def test_waiting_run_maps_to_waiting_with_its_interrupts_and_an_in_memory_checkpointer(
    adapter: LangGraphBackend, server: ServerClient
):
    from console.semantics import recoverability_warnings

    tid = server.run_until_interrupted("inbox", {})
    run = await adapter.get_run(tid)
    interrupt = await the_interrupt(adapter, tid)
    assert run.state is RunState.WAITING and run.name == "inbox"
    assert run.interrupts == [interrupt.id]
    assert run.heartbeat_expected is False  # parked: nothing runs that could heartbeat
    assert run.checkpointer == "memory"
    assert any("in-memory checkpointer" in w for w in recoverability_warnings(run))
    steps = await adapter.journal(tid)
    assert [(s.name, s.status) for s in steps] == [("draft", "completed"), ("review", "in_flight")]
    assert "waiting for a decision" in steps[-1].detail


async def test_a_resume_value_that_crashes_the_node_is_reported_as_a_poisoned_resume(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("picky", {})
    interrupt = await the_interrupt(adapter, tid)
    outcome = await adapter.decide(
        interrupt, Decision(kind=DecisionKind.RESPOND, response="acme"), idempotency_key="k",
        identity="ann",
    )
    assert "poisoned resume" in outcome.detail
    thread = server.wait_status(tid, "error")
    assert not thread["interrupts"]  # LangGraph drops the item: the thread looks merely failed
    run = await adapter.get_run(tid)
    assert run.state is RunState.FAILED
    (warning,) = [w for w in run.warnings if "poisoned resume" in w]
    assert "respond irq sent (by ann)" in warning
    assert f"POST /threads/{tid}/state" in warning  # the documented recovery
    observed = next(r for r in (await adapter.observe()).runs if r.native_id == tid)
    assert any("poisoned resume" in w for w in observed.warnings)
