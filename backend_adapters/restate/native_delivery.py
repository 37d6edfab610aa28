"""Answering a native wait (``native_waits.py``): resolve or reject an awakeable on the
ingress, or call one of a workflow's shared handlers that resolves its promise.

Once per decision. The gateway journals its intent before it asks the adapter, and may ask
again after a crash (a re-drive, same idempotency key); Restate itself does not help for
awakeables (a second resolve is accepted, 202, and appended as a second notification), so
the journal is checked first:

- awakeable: a ``Notification: Signal`` for its index already there -> nothing is sent;
  it holds what this decision sends: "already delivered"; anything else: ``Conflict``.
- promise: the call carries ``idempotency-key: irq-<decision key>`` (Restate runs one call
  per key and answers a repeat with the recorded result); a promise already resolved ->
  nothing is sent: "already delivered" when our keyed call did it, else ``Conflict``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from backend_adapters.base import (
    ActionOutcome,
    BackendError,
    Conflict,
    NotFound,
    Unsupported,
)
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.restate.conventions import awakeable_id, signal_index
from backend_adapters.restate.http_api import RestateHttp, sql_literal
from backend_adapters.restate.journal_view import JournalView, read_journal
from backend_adapters.restate.native_waits import (
    PROMISE_PREFIX,
    awakeable_answer,
    native_interrupts,
)
from console.decision_check import native_payload
from console.model import Decision, Interrupt, InterruptKind

#: the invocation columns a delivery needs (the waits are recomputed from them)
_ROW = (
    "id, target, target_service_name, target_service_key, target_handler_name, status, "
    "created_at, suspended_waiting_for_signals"
)


def call_key(idempotency_key: str) -> str:
    """The ``idempotency-key`` of the shared-handler call that carries decision
    ``idempotency_key``."""
    return f"irq-{idempotency_key}"


class NativeDelivery:
    """Delivers decisions to native waits on one Restate server."""

    def __init__(self, http: RestateHttp, *, verify_s: float) -> None:
        self._http = http
        self._verify_s = verify_s

    async def _row(self, inv: str) -> dict[str, Any]:
        rows = await self._http.query(
            f"SELECT {_ROW} FROM sys_invocation WHERE id = {sql_literal(inv)}")
        if not rows:
            raise NotFound(f"no Restate invocation {inv!r}", target=inv)
        return rows[0]

    async def _view(self, inv: str) -> JournalView:
        return read_journal(await self._http.query(
            "SELECT id, index, entry_type, name, entry_json, appended_at FROM sys_journal "
            f"WHERE id = {sql_literal(inv)} AND entry_type <> 'Command: Input'"))

    async def _service(self, name: str) -> dict[str, Any] | None:
        return next((s for s in await self._http.services() if s.get("name") == name), None)

    async def decide(
        self, inv: str, interrupt: Interrupt, decision: Decision, *, idempotency_key: str
    ) -> ActionOutcome:
        row, view = await asyncio.gather(self._row(inv), self._view(inv))
        service = None
        if interrupt.kind is InterruptKind.PROMISE:
            service = await self._service(str(row.get("target_service_name") or ""))
        current = {
            i.native_id: i
            for i in native_interrupts(row, view, service, run_id=interrupt.run_id)
        }
        if interrupt.kind is InterruptKind.AWAKEABLE:
            return await self._awakeable(
                row, view, current.get(interrupt.native_id), interrupt, decision,
                idempotency_key)
        return await self._promise(
            row, current.get(interrupt.native_id), interrupt, decision, idempotency_key)

    # --------------------------------------------------------------------- awakeables

    async def _awakeable(
        self, row: dict[str, Any], view: JournalView, fresh: Interrupt | None,
        interrupt: Interrupt, decision: Decision, key: str,
    ) -> ActionOutcome:
        inv, awk = str(row["id"]), interrupt.native_id
        index = signal_index(awk)
        if index is None or awakeable_id(inv, index) != awk:
            raise NotFound(f"{awk} is not an awakeable of invocation {inv}", target=interrupt.id)
        resolve, value = awakeable_answer(decision)
        if index in view.signals:
            failure = view.signal_failures.get(index)
            same = failure == value if not resolve else (
                failure is None and view.signals[index] == value)
            if same:
                return ActionOutcome(
                    detail=f"already delivered: awakeable {awk} holds this decision "
                    "(nothing sent again)")
            was = f"rejected ({failure})" if failure is not None else (
                f"resolved with {view.signals[index]!r}")
            raise Conflict(f"awakeable {awk} was already {was}", target=interrupt.id)
        if row.get("status") == "completed":
            raise Conflict(f"invocation {inv} is completed: its awakeable {awk} is gone",
                           target=interrupt.id)
        if fresh is None:
            raise NotFound(f"stale interrupt: invocation {inv} no longer waits on {awk}",
                           target=interrupt.id)
        refuse_decision(fresh, decision, target=interrupt.id)
        if resolve:
            await self._http.resolve_awakeable(awk, value, key=key)
        else:
            await self._http.reject_awakeable(awk, str(value), key=key)
        await self._until(lambda: self._signalled(inv, index))
        op = "resolve" if resolve else "reject"
        return ActionOutcome(
            detail=f"{op}d awakeable {awk} with {decision.kind.value}",
            operations=[f"POST /restate/awakeables/{awk}/{op}"],
        )

    async def _signalled(self, inv: str, index: int) -> bool:
        return index in (await self._view(inv)).signals

    async def _until(self, check: Any, limit_s: float | None = None) -> bool:
        deadline = time.monotonic() + (self._verify_s if limit_s is None else limit_s)
        while True:
            if await check():
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)

    # ----------------------------------------------------------------------- promises

    async def _promise_row(self, service: str, key: str, name: str) -> dict[str, Any] | None:
        rows = await self._http.query(
            "SELECT completed, completion_success_value_utf8, completion_failure FROM "
            f"sys_promise WHERE service_name = {sql_literal(service)} AND service_key = "
            f"{sql_literal(key)} AND key = {sql_literal(name)}")
        return rows[0] if rows else None

    async def _our_call(self, service: str, key: str, idem: str) -> bool:
        rows = await self._http.query(
            "SELECT id FROM sys_invocation WHERE target_service_name = "
            f"{sql_literal(service)} AND target_service_key = {sql_literal(key)} AND "
            f"idempotency_key = {sql_literal(idem)} AND completion_result = 'success'")
        return bool(rows)

    async def _promise(
        self, row: dict[str, Any], fresh: Interrupt | None, interrupt: Interrupt,
        decision: Decision, key: str,
    ) -> ActionOutcome:
        inv = str(row["id"])
        name = interrupt.native_id.removeprefix(PROMISE_PREFIX)
        service = str(row.get("target_service_name") or "")
        wf_key = str(row.get("target_service_key") or "")
        if not wf_key:
            raise NotFound(f"invocation {inv} is not a workflow: no promise {name!r}")
        idem = call_key(key)
        promise = await self._promise_row(service, wf_key, name)
        if promise and promise.get("completed"):
            if await self._our_call(service, wf_key, idem):
                return ActionOutcome(
                    detail=f"already delivered: promise '{name}' was resolved by this "
                    "decision (nothing sent again)")
            held = promise.get("completion_success_value_utf8") or promise.get(
                "completion_failure")
            raise Conflict(f"promise '{name}' of {service}/{wf_key} was already resolved: "
                           f"{held}", target=interrupt.id)
        if row.get("status") == "completed":
            raise Conflict(f"invocation {inv} is completed: it waits for nothing",
                           target=interrupt.id)
        if fresh is None:
            raise NotFound(f"stale interrupt: invocation {inv} no longer waits for promise "
                           f"{name!r}", target=interrupt.id)
        refuse_decision(fresh, decision, target=interrupt.id)
        handler = decision.handler or (fresh.handlers[0].name if fresh.handlers else None)
        if handler is None:
            raise Unsupported(f"{service} lists no shared handler that could resolve promise "
                              f"{name!r}", target=interrupt.id)
        op = f"POST /{service}/{wf_key}/{handler} (idempotency-key {idem})"
        code, message = await self._http.call_handler(
            service, wf_key, handler, native_payload(decision), idempotency_key=idem)
        if code >= 300:
            raise BackendError(
                f"{service}/{wf_key}/{handler} refused the decision ({code}): {message}; "
                "the promise is still open", target=interrupt.id)

        async def resolved() -> bool:
            found = await self._promise_row(service, wf_key, name)
            return bool(found and found.get("completed"))

        if not await self._until(resolved, min(self._verify_s, 3.0)):
            raise BackendError(
                f"{handler} answered, but promise '{name}' is still open: this handler does "
                f"not resolve it (handlers: {', '.join(h.name for h in fresh.handlers)})",
                target=interrupt.id)
        return ActionOutcome(
            detail=f"resolved promise '{name}' through {service}/{wf_key}/{handler} with "
            f"{decision.kind.value}",
            operations=[op],
        )
