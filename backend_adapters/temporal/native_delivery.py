"""Answering a native wait: the operator's payload sent to the workflow's own signal or update.

- The one decision check (``console/decision_check.py``) first: the decision is allowed, the
  handler is one of the wait's (named when there are several), and the payload fits the JSON
  Schema the workflow publishes for it (memo ``irq_schemas``).
- The wait must still be the one the item shows (its id is the event where it began): a
  decision for an old wait is never applied to a later one. When the wait has moved on, the
  history since it began is searched for this decision's own signal or update first — a
  re-driven decision whose first attempt was delivered reports that, and sends nothing.
- A signal carries ``requestId`` = a UUID derived from the decision's idempotency key: the
  server writes one SIGNALED event per request id, however often it is re-sent.
- An update uses the idempotency key as its ``updateId`` and waits for the result; the
  workflow's validator refusing it comes back as ``BackendError`` with the validator's message
  (the gateway's outcome ``failed``, CLI exit 1: the item stays open, nothing is written to
  history).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from backend_adapters.base import (
    ActionOutcome,
    BackendError,
    Conflict,
    InvalidInput,
    Unreachable,
)
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.native_wait_shapes import WAIT_PREFIX
from backend_adapters.temporal.native_waits import NativeWaits
from backend_adapters.temporal.observed_workflows import ObservedWorkflows
from backend_adapters.temporal.payloads import decode_payloads, json_payloads
from console.decision_check import native_payload
from console.model import Decision, Interrupt, InterruptHandler, split_run_id

#: namespace of the signal request ids derived from idempotency keys
_REQUEST_IDS = uuid.UUID("5f0c6f3e-2b1a-4d0e-9a57-6b1d2c7e9f10")
#: most reverse-history pages searched for an earlier delivery of the same decision
_SEARCH_PAGES = 5


def signal_request_id(idempotency_key: str) -> str:
    """The ``requestId`` of the signal that carries the decision with this key."""
    return str(uuid.uuid5(_REQUEST_IDS, idempotency_key))


class NativeDelivery:
    """Sends the operator's payload to a native wait's signal or update, once."""

    def __init__(
        self,
        connection: TemporalConnection,
        config: TemporalConfig,
        observed: ObservedWorkflows,
        waits: NativeWaits,
    ) -> None:
        self._connection = connection
        self._config = config
        self._observed = observed
        self._waits = waits

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        refuse_decision(interrupt, decision, target=interrupt.id)
        handler = chosen_handler(interrupt, decision)
        _, _, wid = split_run_id(interrupt.run_id)
        http = self._connection.http
        describe = await http.describe_workflow(wid)
        site = await self._waits.current_site(wid, describe)
        if site is None or site.native_id != interrupt.native_id:
            earlier = await self._delivered_since(wid, interrupt, handler, idempotency_key)
            if earlier:
                self._observed.mark_dirty(wid)
                if handler.kind == "update":  # re-POST: the server answers its recorded outcome
                    return await self._update(
                        interrupt, handler, decision, idempotency_key, identity
                    )
                return ActionOutcome(
                    detail=f"signal {handler.name} was already delivered to {wid} by this "
                    f"decision ({earlier}); not sent again",
                    operations=[],
                )
            now = f"it now waits {site.text()}" if site else "it is not waiting any more"
            raise Conflict(
                f"{interrupt.id}: the wait this decision answers has ended ({now}); nothing "
                "was sent",
                target=interrupt.id,
            )
        self._observed.mark_dirty(wid)
        if handler.kind == "update":
            return await self._update(interrupt, handler, decision, idempotency_key, identity)
        request_id = signal_request_id(idempotency_key)
        try:
            await http.signal_workflow(
                wid,
                handler.name,
                args=json_payloads([native_payload(decision)]),
                identity=identity,
                request_id=request_id,
            )
        except Conflict as exc:  # closed since
            raise Conflict(f"{interrupt.id}: the run is closed ({exc.message})") from exc
        return ActionOutcome(
            detail=f"signal {handler.name} delivered to {wid} (requestId {request_id}: "
            "Temporal records it once however often it is re-sent)",
            operations=[f"signal {handler.name} requestId={request_id}"],
        )

    async def _update(
        self,
        interrupt: Interrupt,
        handler: InterruptHandler,
        decision: Decision,
        key: str,
        identity: str,
    ) -> ActionOutcome:
        _, _, wid = split_run_id(interrupt.run_id)
        deadline = time.monotonic() + self._config.decide_wait_s
        args = json_payloads([native_payload(decision)])
        while True:
            try:
                answer = await self._connection.http.update_workflow(
                    wid, handler.name, update_id=key, args=args, identity=identity
                )
            except Conflict as exc:
                raise Conflict(f"{interrupt.id}: the run is closed ({exc.message})") from exc
            outcome = answer.get("outcome")
            if isinstance(outcome, dict):
                break
            if time.monotonic() >= deadline:
                raise Unreachable(
                    f"{interrupt.id}: no worker took update {handler.name} within "
                    f"{self._config.decide_wait_s:g}s (admitted, not delivered); resend with "
                    "the same idempotency key",
                    target=interrupt.id,
                )
        if "failure" in outcome:
            failure = outcome.get("failure") or {}
            message = str(failure.get("message") or "rejected")
            # the base error: the gateway's outcome "failed" (CLI exit 1), not a usage error —
            # the payload was well formed, the workflow's own rule said no
            raise BackendError(
                f"{interrupt.id}: the workflow refused update {handler.name}: {message} "
                "(nothing was applied; the wait is still open)",
                target=interrupt.id,
            )
        result = decode_payloads(outcome.get("success"))
        said = f": {result[0]!r}" if result and result[0] is not None else ""
        return ActionOutcome(
            detail=f"update {handler.name} completed on {wid} (updateId {key}){said}",
            operations=[f"update {handler.name} updateId={key}"],
        )

    async def _delivered_since(
        self, wid: str, interrupt: Interrupt, handler: InterruptHandler, key: str
    ) -> str:
        """Where this decision's signal or update already is in the history since the wait
        began (``event #N``), or '' when it is not there."""
        began = int(interrupt.native_id.removeprefix(WAIT_PREFIX) or 0)
        request_id = signal_request_id(key)
        token: str | None = None
        for _ in range(_SEARCH_PAGES):
            page = await self._connection.http.history(
                wid, reverse=True, page_size=100, next_page_token=token
            )
            for event in (page.get("history") or {}).get("events") or []:
                eid = int(event.get("eventId") or 0)
                if eid <= began:
                    return ""
                if _carries(event, handler.kind, request_id, key):
                    return f"event #{eid}"
            token = page.get("nextPageToken") or None
            if not token:
                break
        return ""


def _carries(event: dict[str, Any], kind: str, request_id: str, key: str) -> bool:
    if kind == "signal":
        attrs = event.get("workflowExecutionSignaledEventAttributes") or {}
        return bool(attrs) and attrs.get("requestId") == request_id
    attrs = event.get("workflowExecutionUpdateAcceptedEventAttributes") or {}
    meta = (attrs.get("acceptedRequest") or {}).get("meta") or {}
    return bool(attrs) and (meta.get("updateId") == key or attrs.get("protocolInstanceId") == key)


def chosen_handler(interrupt: Interrupt, decision: Decision) -> InterruptHandler:
    """The handler that answers (the decision check has made sure there is exactly one)."""
    for handler in interrupt.handlers:
        if decision.handler is None or handler.name == decision.handler:
            return handler
    raise InvalidInput(f"decision refused: {interrupt.id} has no handler", target=interrupt.id)
