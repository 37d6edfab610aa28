"""Deciding on DBOS: a decision is a ``send`` on the interrupt's topic, at most once.

DBOS's idempotency key is the interrupt id, so at most one decision per interrupt is ever
delivered; a retry of one the agent already consumed (re-driven after a gateway crash) is
recognised from the agent's journal (its ``DBOS.recv`` step) and reported as delivered.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from backend_adapters.base import ActionOutcome, Conflict, NotFound, PauseLedger
from backend_adapters.dbos.conventions import ACTIVE_STATUSES, EVENT_INTERRUPT, decision_topic
from backend_adapters.dbos.mapping import BACKEND, paused_by_irq
from backend_adapters.dbos.system_database import SystemDatabase
from backend_adapters.decision_refusal import refuse_decision, refuse_invalid_decision
from console.model import Decision, Interrupt, Run


class DBOSDecisionDelivery:
    """Sends decisions to the agents of one system database."""

    def __init__(self, database: SystemDatabase, ledger: PauseLedger, *, context: str) -> None:
        self._database = database
        self._ledger = ledger
        self._context = context
        # interrupt native id -> idempotency key of the decision this adapter sent for it
        self._sent: dict[str, str] = {}

    def _decide_sync(
        self, interrupt: Interrupt, message: dict[str, Any], *, ledger_paused: bool
    ) -> str:
        client = self._database.connected()
        native_id = _workflow_of(interrupt, self._context)
        status = self._database.status(native_id)
        native = str(status.status)
        live = native in ACTIVE_STATUSES or paused_by_irq(status, ledger_paused)
        current = client.get_event(native_id, EVENT_INTERRUPT, timeout_seconds=0) if live else None
        current_id = current.get("interrupt_id") if isinstance(current, dict) else None
        if current_id != interrupt.native_id:
            # A retry of a decision the agent already consumed (e.g. re-driven after a gateway
            # crash) is a success, not a conflict: the journal's recv step shows who sent it.
            delivered = self._delivered_sync(native_id, interrupt.native_id)
            if delivered is not None and delivered.get("command_id") == message["command_id"]:
                return (
                    f"already delivered: the agent received this {delivered.get('type')} "
                    "(same command id)"
                )
            if delivered is not None:
                raise Conflict(
                    f"interrupt {interrupt.native_id} was already decided "
                    f"({delivered.get('type')} by {delivered.get('by', '?')})"
                )
        if not live:
            raise Conflict(
                f"interrupt {interrupt.native_id} is no longer pending: the run is {native}"
            )
        if current_id != interrupt.native_id:
            now = f"interrupt {current_id} is pending" if current_id else "no interrupt is pending"
            raise Conflict(
                f"interrupt {interrupt.native_id} is no longer pending ({now}): it was decided, "
                "withdrawn or expired"
            )
        pending: dict[str, Any] = current if isinstance(current, dict) else {}
        allowed = pending.get("allowed_decisions") or ["approve", "reject"]
        refuse_invalid_decision(  # against the interrupt as the agent publishes it now
            message["type"], allowed, args=message.get("args"), schema=pending.get("args_schema")
        )
        client.send(
            native_id,
            message,
            decision_topic(interrupt.native_id),
            interrupt.native_id,  # idempotency key: at most one decision per interrupt
        )
        suffix = " (the run is paused: delivered when it resumes)" if native == "CANCELLED" else ""
        return (
            f"sent {message['type']} on topic {decision_topic(interrupt.native_id)} "
            f"(DBOS idempotency key = interrupt id){suffix}"
        )

    def _delivered_sync(self, native_id: str, interrupt_native_id: str) -> dict[str, Any] | None:
        """The decision message the agent received for this interrupt, from its journal."""
        steps = self._database.connected().list_workflow_steps(native_id, load_output=True) or []
        for step in steps:
            output = step.get("output")
            if (
                step.get("function_name") == "DBOS.recv"
                and isinstance(output, dict)
                and output.get("interrupt_id") == interrupt_native_id
            ):
                return output
        return None

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        refuse_decision(interrupt, decision, target=interrupt.id)
        earlier = self._sent.get(interrupt.native_id)
        if earlier is not None and earlier != idempotency_key:
            raise Conflict(
                f"a decision for interrupt {interrupt.native_id} was already sent (command "
                f"{earlier}); DBOS delivers at most one decision per interrupt",
                target=interrupt.id,
            )
        message: dict[str, Any] = {
            **decision.payload(),
            "by": identity,
            "interrupt_id": interrupt.native_id,
            "command_id": idempotency_key,
            "decided_at": datetime.now(UTC).isoformat(),
        }
        detail = await self._database.call(
            self._decide_sync,
            interrupt,
            message,
            ledger_paused=self._ledger.is_paused(interrupt.run_id),
        )
        self._sent[interrupt.native_id] = idempotency_key
        if len(self._sent) > 10_000:
            self._sent.pop(next(iter(self._sent)))
        return ActionOutcome(detail=detail, operations=["get_event(irq.interrupt)", "send"])


def _workflow_of(interrupt: Interrupt, context: str) -> str:
    prefix = Run.make_id(BACKEND, context, "")
    if interrupt.run_id.startswith(prefix):
        return interrupt.run_id[len(prefix) :]
    raise NotFound(f"interrupt {interrupt.id} does not belong to dbos:{context}")
