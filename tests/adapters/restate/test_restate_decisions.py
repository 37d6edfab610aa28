"""Decisions through awakeables on a real Restate server: each kind reaches the handler
exactly once (the handler's own record, kept outside Restate), a second decision is a
conflict, a disallowed edit is refused before anything is sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from ingress_tap import IngressTap
from restate_scenarios import RestateStack, invocation, send, wait_for

from backend_adapters.base import Conflict, InvalidInput, MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.restate.adapter import RestateBackend
from console.model import Decision, DecisionKind, Interrupt, RunState


async def _pending(adapter: RestateBackend, inv: str) -> Interrupt:
    async def find() -> Interrupt | None:
        obs = await adapter.observe()
        return next((i for i in obs.interrupts if i.run_id == adapter.run_id(inv)), None)

    import asyncio
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = await find()
        if found is not None:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no pending interrupt for {inv}")


def _decisions(stack: RestateStack, inv: str) -> list[dict[str, object]]:
    return [
        json.loads(line.removeprefix("decision "))
        for line in stack.lines(inv)
        if line.startswith("decision ")
    ]


DECISIONS = [
    Decision(kind=DecisionKind.APPROVE),
    Decision(kind=DecisionKind.EDIT, args={"amount": 42}),
    Decision(kind=DecisionKind.REJECT, feedback="no"),
    Decision(kind=DecisionKind.RESPOND, response="call me"),
]


@pytest.fixture
async def tapped(stack: RestateStack) -> AsyncIterator[tuple[RestateBackend, IngressTap]]:
    """The adapter with a recording proxy in front of the ingress: every awakeable resolve it
    sends is counted (the handler awaits its awakeable once, so its own record cannot show a
    second delivery)."""
    tap = IngressTap(stack.server.ingress_url).start()
    backend = open_backend(tap.backend_url(stack.server.admin_url), MemoryPauseLedger())
    assert isinstance(backend, RestateBackend)
    await backend.start()
    try:
        yield backend, tap
    finally:
        await backend.close()
        tap.stop()


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda d: d.kind.value)
async def test_decision_reaches_handler_once_and_second_is_conflict(
    stack: RestateStack, tapped: tuple[RestateBackend, IngressTap], decision: Decision
) -> None:
    adapter, tap = tapped
    admin = stack.server.admin_url
    inv = send(stack.server.ingress_url, "IrqHuman/approve", {})
    interrupt = await _pending(adapter, inv)
    assert interrupt.title == "Wire funds?" and interrupt.args == {"amount": 10, "to": "acme"}
    assert interrupt.args_schema and interrupt.args_schema["required"] == ["amount"]
    run = await adapter.get_run(inv)
    assert run.state is RunState.WAITING and run.interrupts == [interrupt.id]

    await adapter.decide(interrupt, decision, idempotency_key="k-1", identity="op")
    wait_for(lambda: invocation(admin, inv).get("status") == "completed", "completion")
    got = _decisions(stack, inv)
    assert len(got) == 1 and got[0]["type"] == decision.kind.value
    assert {k: got[0][k] for k in decision.payload()} == decision.payload()

    # the same command re-driven (gateway crash between intent and outcome): no second send
    again = await adapter.decide(interrupt, decision, idempotency_key="k-1", identity="op")
    assert "already delivered" in again.detail
    with pytest.raises(Conflict):
        await adapter.decide(interrupt, decision, idempotency_key="k-2", identity="op2")
    assert len(_decisions(stack, inv)) == 1
    # what the adapter sent: one resolve, under the first key; neither the re-drive nor the
    # conflicting decision sent anything
    assert [(r.key, r.body["type"]) for r in tap.resolves] == [("k-1", decision.kind.value)]
    assert (await adapter.get_run(inv)).state is RunState.COMPLETED
    assert not [i for i in (await adapter.observe()).interrupts if i.run_id == run.id]


async def test_edit_outside_schema_is_refused_before_sending(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    inv = send(stack.server.ingress_url, "IrqHuman/approve", {})
    interrupt = await _pending(adapter, inv)
    with pytest.raises(InvalidInput):
        await adapter.decide(
            interrupt,
            Decision(kind=DecisionKind.EDIT, args={"amount": 1000}),
            idempotency_key="k-x",
            identity="op",
        )
    assert (await adapter.get_run(inv)).state is RunState.WAITING
    await adapter.terminate(inv, reason="cleanup", identity="op")
    assert _decisions(stack, inv) == []
