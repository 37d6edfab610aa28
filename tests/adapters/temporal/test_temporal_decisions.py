"""approve / edit / reject / respond reach the workflow exactly once (real server and worker)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from backend_adapters.base import Conflict, InvalidInput, MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.temporal.adapter import TemporalBackend
from console.model import Decision, DecisionKind, Interrupt, RunState

SCHEMA = {
    "type": "object",
    "properties": {
        "env": {"enum": ["staging", "prod"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["env"],
    "additionalProperties": False,
}

DECISIONS = {
    "approve": Decision(kind=DecisionKind.APPROVE),
    "edit": Decision(kind=DecisionKind.EDIT, args={"env": "staging", "replicas": 3}),
    "reject": Decision(kind=DecisionKind.REJECT, feedback="not during the freeze"),
    "respond": Decision(kind=DecisionKind.RESPOND, response={"answer": "use region eu-1"}),
}


def approval_params(kind: str) -> dict[str, Any]:
    spec = {
        "title": f"Deploy ({kind})?",
        "description": "roll out model v2",
        "action": "deploy",
        "args": {"env": "prod", "replicas": 2},
        "args_schema": SCHEMA,
        "allowed": ["approve", "edit", "reject", "respond"],
    }
    return {
        "interrupts": [{**spec, "id": f"{kind}-a"}, {**spec, "id": f"{kind}-b"}],
        "linger_s": 1.0,
    }


async def wait_interrupt(adapter: TemporalBackend, iid: str, timeout: float = 15.0) -> Interrupt:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for interrupt in await adapter.list_interrupts():
            if interrupt.native_id == iid:
                return interrupt
        await asyncio.sleep(0.1)
    raise AssertionError(f"interrupt {iid} never showed up")


@pytest.fixture
async def second_client(temporal_server, task_queue):
    """Another console (another gateway) talking to the same namespace."""
    backend = open_backend(
        temporal_server.backend_url(query=f"TaskQueue='{task_queue}'"), MemoryPauseLedger()
    )
    await backend.start()
    yield backend
    await backend.close()


async def test_each_decision_reaches_the_workflow_exactly_once(
    adapter: TemporalBackend, second_client, temporal_server, start_worker, task_queue
) -> None:
    start_worker()
    watch_params = {"interrupts": [{"id": "watch-a", "title": "Watched", "allowed": ["approve"]}]}
    temporal_server.start_workflow("ask-watch", "ApprovalAgent", task_queue, watch_params)
    for kind in DECISIONS:
        temporal_server.start_workflow(
            f"ask-{kind}", "ApprovalAgent", task_queue, approval_params(kind)
        )

    # the inbox: every waiting run from one list query, details from the memo
    first = {i.native_id: i for i in [await wait_interrupt(adapter, f"{k}-a") for k in DECISIONS]}
    sent_before = adapter.http.stats.by_kind["query"]
    inbox = await adapter.list_interrupts()
    assert {i.native_id for i in inbox} >= set(first)
    assert adapter.http.stats.by_kind["query"] == sent_before  # no per-workflow query needed
    sample = first["approve-a"]
    assert sample.title == "Deploy (approve)?" and sample.args == {"env": "prod", "replicas": 2}
    assert sample.args_schema == SCHEMA and sample.id == "temporal:local/ask-approve#approve-a"
    # the workflow itself answers the same (query; needs its worker)
    queried = await adapter.pending_interrupts("ask-approve")
    assert [(i.native_id, i.title, i.args) for i in queried] == [
        ("approve-a", sample.title, sample.args)
    ]
    obs = await adapter.observe()
    waiting = {r.native_id: r for r in obs.runs if r.state is RunState.WAITING}
    assert set(waiting) == {f"ask-{k}" for k in DECISIONS} | {"ask-watch"}
    assert waiting["ask-edit"].interrupts == ["temporal:local/ask-edit#edit-a"]

    # the operator looks at one run: its history is long-polled, so a decision sent by another
    # console makes the adapter describe that run first on its next poll
    polls = adapter.http.stats.by_kind["history_poll"]
    adapter.focus({"ask-watch"})
    assert adapter.watched == {"ask-watch"}
    # the watcher read the history so far (one poll) and now waits at its end (a second poll,
    # sent only after the first page was handled): nothing has changed yet, so nothing is
    # marked for a refresh (no observe() in between, which would clear the mark)
    deadline = time.monotonic() + 15
    while adapter.http.stats.by_kind["history_poll"] < polls + 2:
        assert time.monotonic() < deadline, "the watcher never parked at the end of the history"
        await asyncio.sleep(0.05)
    assert "ask-watch" not in adapter.pending_refresh
    await adapter.observe()
    assert adapter.watched == {"ask-watch"}
    watched = await wait_interrupt(second_client, "watch-a")
    await second_client.decide(
        watched, DECISIONS["approve"], idempotency_key="watch-k", identity="bob"
    )
    deadline = time.monotonic() + 15
    while "ask-watch" not in adapter.pending_refresh and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert "ask-watch" in adapter.pending_refresh

    for kind, decision in DECISIONS.items():
        wid = f"ask-{kind}"
        # (1) two clients decide the same interrupt at once, each with its own key
        a = first[f"{kind}-a"]
        results = await asyncio.gather(
            adapter.decide(a, decision, idempotency_key=f"{wid}-k1", identity="alice"),
            second_client.decide(a, decision, idempotency_key=f"{wid}-k2", identity="bob"),
            return_exceptions=True,
        )
        applied = [r for r in results if not isinstance(r, BaseException)]
        conflicts = [r for r in results if isinstance(r, Conflict)]
        assert len(applied) == 1 and len(conflicts) == 1, results
        # ... and the winner resends its command: same key, same outcome, nothing applied twice
        winner_key = f"{wid}-k1" if not isinstance(results[0], BaseException) else f"{wid}-k2"
        again = await adapter.decide(a, decision, idempotency_key=winner_key, identity="alice")
        assert kind in again.detail

        # (2) two clients send the very same command (same idempotency key) at once
        b = await wait_interrupt(adapter, f"{kind}-b")
        both = await asyncio.gather(
            adapter.decide(b, decision, idempotency_key=f"{wid}-k3", identity="alice"),
            second_client.decide(b, decision, idempotency_key=f"{wid}-k3", identity="alice"),
        )
        assert all(kind in o.detail for o in both)

    for kind in DECISIONS:
        close = temporal_server.result(f"ask-{kind}")
        result = close["workflowExecutionCompletedEventAttributes"]["result"][0]
        delivered = result["delivered"]
        assert [d["interrupt_id"] for d in delivered] == [f"{kind}-a", f"{kind}-b"], delivered
        assert delivered[1]["update_id"] == f"ask-{kind}-k3"
        outcome = result["outcomes"][0]
        assert outcome["kind"] == kind
        if kind == "approve":
            assert outcome["ran_with"] == {"env": "prod", "replicas": 2}
        elif kind == "edit":
            assert outcome["ran_with"] == {"env": "staging", "replicas": 3}
        elif kind == "reject":
            assert outcome["ran_with"] is None and outcome["feedback"] == "not during the freeze"
        else:
            assert outcome["response"] == {"answer": "use region eu-1"}

    # a decision for a run that has finished: conflict, not a crash
    with pytest.raises(Conflict):
        await adapter.decide(
            first["approve-a"], DECISIONS["approve"], idempotency_key="late-key", identity="carol"
        )


async def test_invalid_edits_are_rejected(
    adapter: TemporalBackend, temporal_server, start_worker, task_queue
) -> None:
    start_worker()
    temporal_server.start_workflow("ask-bad", "ApprovalAgent", task_queue, approval_params("bad"))
    interrupt = await wait_interrupt(adapter, "bad-a")
    sent = adapter.http.stats.by_kind["update"]

    # checked against args_schema before anything is sent
    with pytest.raises(InvalidInput, match="replicas"):
        await adapter.decide(
            interrupt,
            Decision(kind=DecisionKind.EDIT, args={"env": "prod", "replicas": 50}),
            idempotency_key="bad-1",
            identity="alice",
        )
    assert adapter.http.stats.by_kind["update"] == sent

    # and by the workflow's validator (an interrupt copy that lost its schema)
    blind = interrupt.model_copy(update={"args_schema": None})
    with pytest.raises(InvalidInput, match="env"):
        await adapter.decide(
            blind,
            Decision(kind=DecisionKind.EDIT, args={"env": "moon"}),
            idempotency_key="bad-2",
            identity="alice",
        )
    # the interrupt is still pending after the rejections: a valid decision applies
    outcome = await adapter.decide(
        interrupt, DECISIONS["approve"], idempotency_key="bad-3", identity="alice"
    )
    assert "approve" in outcome.detail
    await adapter.terminate("ask-bad", reason="test cleanup", identity="tests")
