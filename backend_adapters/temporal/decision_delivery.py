"""Deciding: a decision delivered as the workflow update ``UPDATE_NAME``, exactly once.

``updateId`` = the command's idempotency key, so a resend never applies twice. The decision is
checked first by the one rule (``backend_adapters/decision_refusal.py``); the workflow's own
validator checks it again against the interrupt as it holds it now.
"""

from __future__ import annotations

import time

from backend_adapters.base import (
    ActionOutcome,
    Conflict,
    InvalidInput,
    Unreachable,
    Unsupported,
)
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.conventions import (
    ERROR_INVALID_DECISION,
    ERROR_NOT_PENDING,
    UPDATE_NAME,
    update_input,
)
from backend_adapters.temporal.observed_workflows import ObservedWorkflows
from backend_adapters.temporal.payloads import decode_payloads
from console.model import Decision, Interrupt, split_run_id


class DecisionDelivery:
    """Sends decisions to workflows and turns the workflow's answer into an outcome."""

    def __init__(
        self,
        connection: TemporalConnection,
        config: TemporalConfig,
        observed: ObservedWorkflows,
    ) -> None:
        self._connection = connection
        self._config = config
        self._observed = observed

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        _, _, native_id = split_run_id(interrupt.run_id)
        refuse_decision(interrupt, decision, target=interrupt.id)
        args = [
            update_input(
                interrupt.native_id,
                decision.payload(),
                by=identity,
                idempotency_key=idempotency_key,
            )
        ]
        deadline = time.monotonic() + self._config.decide_wait_s
        while True:
            try:
                answer = await self._connection.http.update_workflow(
                    native_id, UPDATE_NAME, update_id=idempotency_key, args=args, identity=identity
                )
            except Conflict as exc:  # workflow already closed
                raise Conflict(
                    f"{interrupt.id}: the run is closed; the interrupt is no longer pending "
                    f"({exc.message})",
                    target=interrupt.id,
                ) from exc
            outcome = answer.get("outcome")
            if isinstance(outcome, dict):
                break
            if time.monotonic() >= deadline:
                raise Unreachable(
                    f"{interrupt.id}: no worker accepted the decision within "
                    f"{self._config.decide_wait_s:g}s (update admitted, not delivered); resend "
                    "with the same idempotency key",
                    target=interrupt.id,
                )
        self._observed.mark_dirty(native_id)
        if "failure" in outcome:
            failure = outcome["failure"] or {}
            ftype = str((failure.get("applicationFailureInfo") or {}).get("type") or "")
            message = str(failure.get("message") or "decision rejected by the workflow")
            if ftype == ERROR_NOT_PENDING:
                raise Conflict(f"{interrupt.id}: {message}", target=interrupt.id)
            if ftype == ERROR_INVALID_DECISION:
                raise InvalidInput(f"{interrupt.id}: {message}", target=interrupt.id)
            if "not found" in message and UPDATE_NAME in message:
                raise Unsupported(
                    f"{interrupt.id}: the workflow has no '{UPDATE_NAME}' update handler "
                    f"({message})",
                    target=interrupt.id,
                )
            raise InvalidInput(f"{interrupt.id}: rejected by the workflow: {message}")
        result = decode_payloads(outcome.get("success"))
        applied = result[0] if result else {}
        detail = (
            f"{decision.kind.value} delivered to {interrupt.native_id} (update {idempotency_key})"
        )
        if isinstance(applied, dict) and applied.get("applied_at"):
            detail += f", applied at {applied['applied_at']}"
        return ActionOutcome(
            detail=detail, operations=[f"update {UPDATE_NAME} updateId={idempotency_key}"]
        )
