"""Native human waits on a real Restate server (issue 22): handlers written the way Restate's
own examples write them (``native_services.py``, no irq import) become inbox items, are
answered once through the adapter, and Restate itself shows what arrived (``sys_journal``,
``sys_promise``, the handler's own record); a re-driven decision sends nothing twice, and a
bad payload or an unknown handler is refused with nothing changed."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ingress_tap import IngressTap
from restate_scenarios import RestateStack, invocation, send, sql, wait_for

from backend_adapters.base import BackendError, Conflict, InvalidInput, MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.restate.adapter import RestateBackend
from backend_adapters.restate.native_delivery import call_key
from console.model import Decision, DecisionKind, Interrupt, InterruptKind, RunState
from console.processes import stop_process
from console.semantics import recoverability_warnings
from tests.cli.cli_harness import INTERRUPT_FIELDS, ServedGateway, irq, start_gateway

RESTATE_APP = "native_services:app"  # conftest's stack serves it


async def _item(
    adapter: RestateBackend, inv: str, kind: InterruptKind, timeout_s: float = 60
) -> tuple[Interrupt, float]:
    """The inbox item of invocation ``inv`` and when it was first seen (monotonic)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        obs = await adapter.observe()
        found = [i for i in obs.interrupts if i.run_id == adapter.run_id(inv) and i.kind is kind]
        if found:
            assert len(found) == 1, found
            return found[0], time.monotonic()
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {kind.value} item for {inv}")


def _records(stack: RestateStack, who: str, what: str) -> list[Any]:
    return [json.loads(line.split(" ", 1)[1]) for line in stack.lines(who)
            if line.split(" ", 1)[0] == what]


def _signals(admin: str, inv: str) -> list[dict[str, Any]]:
    return sql(admin, f"SELECT index, entry_json FROM sys_journal WHERE id = '{inv}' AND "
                      "entry_type = 'Notification: Signal' ORDER BY index")


def _promise(admin: str, workflow: str, key: str, name: str) -> dict[str, Any]:
    rows = sql(admin, "SELECT completed, completion_success_value_utf8 FROM sys_promise WHERE "
                      f"service_name = '{workflow}' AND service_key = '{key}' AND key = '{name}'")
    return rows[0] if rows else {}


def _calls(admin: str, workflow: str, key: str) -> list[dict[str, Any]]:
    """The invocations of a workflow's handlers (its run left out)."""
    return sql(admin, "SELECT target_handler_name, idempotency_key, completion_result FROM "
                      f"sys_invocation WHERE target_service_name = '{workflow}' AND "
                      f"target_service_key = '{key}' AND target_handler_name <> 'run'")


@pytest.fixture
async def tapped(stack: RestateStack) -> AsyncIterator[tuple[RestateBackend, IngressTap]]:
    """The adapter behind a recording proxy of the ingress (every resolve / reject sent)."""
    tap = IngressTap(stack.server.ingress_url).start()
    backend = open_backend(tap.backend_url(stack.server.admin_url), MemoryPauseLedger())
    assert isinstance(backend, RestateBackend)
    await backend.start()
    try:
        yield backend, tap
    finally:
        await backend.close()
        tap.stop()


AWAKEABLE_DECISIONS = [
    (Decision(kind=DecisionKind.APPROVE), {"type": "approve"}),
    (Decision(kind=DecisionKind.EDIT, args={"amount": 5}), {"type": "edit", "args": {"amount": 5}}),
    (Decision(kind=DecisionKind.RESPOND, response={"ok": 1}), {"ok": 1}),
    (Decision(kind=DecisionKind.REJECT, feedback="manager said no"), None),
]


@pytest.mark.parametrize(("decision", "value"), AWAKEABLE_DECISIONS,
                         ids=lambda d: d.kind.value if isinstance(d, Decision) else "")
async def test_awakeable_handed_out_is_an_item_answered_once(
    stack: RestateStack, tapped: tuple[RestateBackend, IngressTap], decision: Decision,
    value: Any,
) -> None:
    adapter, tap = tapped
    admin = stack.server.admin_url
    inv = send(stack.server.ingress_url, "NativeReview/review", {})
    item, _ = await _item(adapter, inv, InterruptKind.AWAKEABLE)
    handed = _records(stack, inv, "review-requested")
    assert item.native_id == handed[0] and item.handlers == []
    assert item.wait_site == (
        f"awakeable {handed[0]} handed out by ctx.run 'request human review' (#1)")
    assert {d.value for d in item.allowed_decisions} == {"approve", "edit", "reject", "respond"}
    run = await adapter.get_run(inv)
    assert run.state is RunState.WAITING and run.interrupts == [item.id]
    assert run.in_flight_step is None and recoverability_warnings(run) == []

    with pytest.raises(InvalidInput, match="handler"):  # an awakeable has no handlers
        await adapter.decide(item, decision.model_copy(update={"handler": "nope"}),
                             idempotency_key="k-0", identity="op")
    outcome = await adapter.decide(item, decision, idempotency_key="k-1", identity="op")
    assert outcome.operations
    wait_for(lambda: invocation(admin, inv).get("status") == "completed", "completion")
    signals = _signals(admin, inv)
    assert len(signals) == 1
    if value is None:
        assert _records(stack, inv, "rejected") == ["manager said no"]
        assert "manager said no" in signals[0]["entry_json"]
        assert [(r.key, r.body) for r in tap.rejects] == [("k-1", "manager said no")]
    else:
        assert _records(stack, inv, "verdict") == [value]
        assert [(r.key, r.body) for r in tap.resolves] == [("k-1", value)]

    # re-driven (the gateway crashed after sending): nothing is sent again
    again = await adapter.decide(item, decision, idempotency_key="k-1", identity="op")
    assert "already delivered" in again.detail
    other = Decision(kind=DecisionKind.RESPOND, response="something else")
    with pytest.raises(Conflict, match="already"):
        await adapter.decide(item, other, idempotency_key="k-2", identity="op2")
    assert len(_signals(admin, inv)) == 1 and len(tap.resolves) + len(tap.rejects) == 1
    assert not [i for i in (await adapter.observe()).interrupts if i.run_id == run.id]


async def test_awakeable_handed_out_outside_restate_is_seen_from_the_suspension(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    """The id is in no journaled result: the item shows once Restate suspends the
    invocation (inactivity timeout, 1 s here), with the id rebuilt from the signal index."""
    admin = stack.server.admin_url
    httpx.patch(f"{admin}/services/NativeSilent", json={"inactivity_timeout": "1s"},
                timeout=10).raise_for_status()
    inv = send(stack.server.ingress_url, "NativeSilent/review", {})
    wait_for(lambda: _records(stack, inv, "review-requested"), "the id handed out")
    item, _ = await _item(adapter, inv, InterruptKind.AWAKEABLE)
    assert invocation(admin, inv)["status"] == "suspended"
    handed = _records(stack, inv, "review-requested")[0]
    assert item.native_id == handed  # the id as the handler got it
    assert item.wait_site.startswith(f"awakeable {handed} (signal 17): the invocation is "
                                     "suspended")
    await adapter.decide(item, Decision(kind=DecisionKind.RESPOND, response="yes"),
                         idempotency_key="k-s", identity="op")
    wait_for(lambda: _records(stack, inv, "verdict"), "the verdict")
    again = await adapter.decide(item, Decision(kind=DecisionKind.RESPOND, response="yes"),
                                 idempotency_key="k-s", identity="op")
    assert "already delivered" in again.detail
    assert _records(stack, inv, "verdict") == ["yes"] and len(_signals(admin, inv)) == 1


async def test_promise_with_several_handlers_needs_one_and_its_schema(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    admin, key = stack.server.admin_url, f"o-{uuid.uuid4().hex[:8]}"
    inv = send(stack.server.ingress_url, f"NativeOrder/{key}/run", {"item": "x"})
    item, _ = await _item(adapter, inv, InterruptKind.PROMISE)
    assert item.native_id == "promise:decision"
    assert item.wait_site == "journal #3 GetPromise 'decision'"
    assert sorted(h.name for h in item.handlers) == ["approve", "set_limit"]
    schema = next(h.args_schema for h in item.handlers if h.name == "set_limit")
    assert schema and schema["required"] == ["limit"]
    run = await adapter.get_run(inv)
    assert run.state is RunState.WAITING and run.in_flight_step is None
    assert recoverability_warnings(run) == []
    step = next(s for s in await adapter.journal(inv) if s.index == 3)
    assert step.name == "wait for promise 'decision'" and "nothing re-runs" in step.detail

    refused = [
        (Decision(kind=DecisionKind.RESPOND, response={"limit": 5}), "several handlers"),
        (Decision(kind=DecisionKind.RESPOND, response={"limit": 5}, handler="nope"),
         "does not answer"),
        (Decision(kind=DecisionKind.RESPOND, response={"limit": "five"}, handler="set_limit"),
         "payload"),
        (Decision(kind=DecisionKind.APPROVE, handler="set_limit"), "payload"),
    ]
    for bad, why in refused:
        with pytest.raises(InvalidInput, match=why):
            await adapter.decide(item, bad, idempotency_key="k-bad", identity="op")
    assert _promise(admin, "NativeOrder", key, "decision")["completed"] is False
    assert _calls(admin, "NativeOrder", key) == []  # nothing was sent

    good = Decision(kind=DecisionKind.RESPOND, response={"limit": 5}, handler="set_limit")
    outcome = await adapter.decide(item, good, idempotency_key="k-1", identity="op")
    assert outcome.operations == [f"POST /NativeOrder/{key}/set_limit (idempotency-key irq-k-1)"]
    promise = _promise(admin, "NativeOrder", key, "decision")
    assert promise["completed"] is True
    assert json.loads(promise["completion_success_value_utf8"]) == {"limit": 5, "reason": ""}
    wait_for(lambda: _records(stack, key, "decision"), "the workflow's own record")
    assert _records(stack, key, "decision") == [{"limit": 5, "reason": ""}]

    again = await adapter.decide(item, good, idempotency_key="k-1", identity="op")
    assert "already delivered" in again.detail
    with pytest.raises(Conflict, match="already resolved"):
        await adapter.decide(item, good, idempotency_key="k-2", identity="op2")
    assert _calls(admin, "NativeOrder", key) == [
        {"target_handler_name": "set_limit", "idempotency_key": call_key("k-1"),
         "completion_result": "success"}]
    notes = sql(admin, f"SELECT index FROM sys_journal WHERE id = '{inv}' AND "
                       "entry_type = 'Notification: GetPromise'")
    assert len(notes) == 1


async def test_promise_with_one_handler_has_its_deadline_and_takes_approve(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    key = f"p-{uuid.uuid4().hex[:8]}"
    inv = send(stack.server.ingress_url, f"NativePayment/{key}/run", {})
    item, _ = await _item(adapter, inv, InterruptKind.PROMISE)
    assert [h.name for h in item.handlers] == ["verify"] and item.action == "verify"
    assert item.deadline_at is not None
    assert 3000 < (item.deadline_at - item.created_at).total_seconds() <= 3601
    assert "GetPromise 'verify.payment'; sleep #" in item.wait_site
    await adapter.decide(item, Decision(kind=DecisionKind.APPROVE),
                         idempotency_key="k-p", identity="op")
    wait_for(lambda: invocation(stack.server.admin_url, inv).get("status") == "completed",
             "completion")
    assert _records(stack, key, "verified") == [{"type": "approve"}]


async def test_a_handler_that_does_not_resolve_the_promise_leaves_the_item_open(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    admin, key = stack.server.admin_url, f"u-{uuid.uuid4().hex[:8]}"
    inv = send(stack.server.ingress_url, f"NativeSignup/{key}/run", {"mail": "a@b"})
    item, _ = await _item(adapter, inv, InterruptKind.PROMISE)
    assert sorted(h.name for h in item.handlers) == ["click", "status"]
    with pytest.raises(BackendError, match="still open"):
        await adapter.decide(
            item, Decision(kind=DecisionKind.RESPOND, response="s3cret", handler="status"),
            idempotency_key="k-1", identity="op")
    assert (await _item(adapter, inv, InterruptKind.PROMISE))[0].id == item.id
    await adapter.decide(
        item, Decision(kind=DecisionKind.RESPOND, response="s3cret", handler="click"),
        idempotency_key="k-2", identity="op")
    wait_for(lambda: _records(stack, key, "clicked"), "the click")
    assert _records(stack, key, "clicked") == ["s3cret"]
    assert _promise(admin, "NativeSignup", key, "link_clicked")["completed"] is True


@pytest.fixture
def gateway(
    stack: RestateStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServedGateway]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IRQ_HOME", str(home))
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    served = start_gateway(home, [stack.server.backend_url(poll=0.3)])
    try:
        yield served
    finally:
        stop_process(served.process)


def test_native_waits_through_a_real_gateway(gateway: ServedGateway, stack: RestateStack) -> None:
    """``irq inbox`` lists both kinds; ``irq respond --handler`` answers the promise once
    (without a handler: refused, exit 2); ``irq approve`` resolves the awakeable once."""
    env = gateway.env(gateway.operator)
    admin, key = stack.server.admin_url, f"g-{uuid.uuid4().hex[:8]}"
    order = send(stack.server.ingress_url, f"NativeOrder/{key}/run", {"item": "y"})
    review = send(stack.server.ingress_url, "NativeReview/review", {})

    def item(inv: str) -> dict[str, Any] | None:
        out = irq("inbox", "-o", "json", env=env)
        assert out.code == 0, out.stderr
        return next((i for i in json.loads(out.stdout) if i["run_id"].endswith(inv)), None)

    promise = wait_for(lambda: item(order), "the promise in irq inbox")
    assert INTERRUPT_FIELDS <= promise.keys() and promise["kind"] == "promise"
    assert promise["wait_site"] == "journal #3 GetPromise 'decision'"
    assert sorted(h["name"] for h in promise["handlers"]) == ["approve", "set_limit"]
    shown = irq("show", promise["run_id"], "-o", "json", env=env)
    assert shown.code == 0 and "wait for promise 'decision'" in shown.stdout

    refused = irq("respond", promise["id"], "--json", '{"limit": 3}', "--yes", env=env)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert _promise(admin, "NativeOrder", key, "decision")["completed"] is False
    answered = irq("respond", promise["id"], "--json", '{"limit": 3}', "--handler",
                   "set_limit", "--yes", "-o", "json", env=env)
    assert answered.code == 0, answered.stdout + answered.stderr
    assert json.loads(answered.stdout)[0]["outcome"] == "applied"
    again = irq("respond", promise["id"], "--json", '{"limit": 4}', "--handler",
                "set_limit", "--yes", "-o", "json", env=env)
    assert again.code != 0, again.stdout + again.stderr
    wait_for(lambda: _records(stack, key, "decision"), "the workflow's record")
    assert _records(stack, key, "decision") == [{"limit": 3, "reason": ""}]
    assert len(_calls(admin, "NativeOrder", key)) == 1

    awakeable = wait_for(lambda: item(review), "the awakeable in irq inbox")
    assert awakeable["kind"] == "awakeable" and "handed out by ctx.run" in awakeable["wait_site"]
    approved = irq("approve", awakeable["id"], "--yes", "-o", "json", env=env)
    assert approved.code == 0, approved.stdout + approved.stderr
    wait_for(lambda: _records(stack, review, "verdict"), "the verdict")
    assert _records(stack, review, "verdict") == [{"type": "approve"}]
    assert len(_signals(admin, review)) == 1
