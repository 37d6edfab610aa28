"""Acting on DBOS workflows: pause (= cancel + irq's record), resume, cancel; no terminate.

Each action first writes ``irq.intent`` on the workflow (who, why, which action) so the agent
and every gateway read the same meaning of a CANCELLED status; the pause ledger is only
touched on the event-loop side. A resume leaves the pause mark for the observer to clear
(pause_ends.py): a poll that read the row between the intent write and ``resume_workflow``
must still map it as paused.
"""

from __future__ import annotations

from datetime import UTC, datetime

from backend_adapters.base import ActionOutcome, Conflict, PauseLedger, Unsupported
from backend_adapters.dbos.conventions import ACTIVE_STATUSES, ATTR_INTENT
from backend_adapters.dbos.mapping import BACKEND, attributes_of, needs_cleanup, paused_by_irq
from backend_adapters.dbos.pause_ends import PauseEnds
from backend_adapters.dbos.system_database import SystemDatabase
from backend_adapters.run_records import Intent, IntentAction
from console.model import Run


class DBOSActions:
    """The operator's actions on one system database's workflows."""

    def __init__(
        self, database: SystemDatabase, ledger: PauseLedger, ends: PauseEnds, *, context: str
    ) -> None:
        self._database = database
        self._ledger = ledger
        self._ends = ends
        self._context = context

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self._context, native_id)

    def _write_intent(self, native_id: str, action: IntentAction, *, by: str, reason: str) -> None:
        intent: Intent = {
            "action": action,
            "by": by,
            "reason": reason,
            "at": datetime.now(UTC).isoformat(),
        }
        self._database.connected().update_workflow_attributes(
            native_id, {ATTR_INTENT: dict(intent)}, merge=True
        )

    def _pause_sync(
        self, native_id: str, *, by: str, reason: str, ledger_paused: bool
    ) -> tuple[str, list[str]]:
        status = self._database.status(native_id)
        native = str(status.status)
        if native == "CANCELLED":
            if paused_by_irq(status, ledger_paused):
                return "already paused", []
            raise Conflict(f"{native_id} was cancelled: a cancelled run cannot be paused")
        if native not in ACTIVE_STATUSES:
            raise Conflict(f"{native_id} is {native}: only a running run can be paused")
        self._write_intent(native_id, "pause", by=by, reason=reason)
        self._database.connected().cancel_workflow(native_id)
        after = self._database.status(native_id)
        if after.status != "CANCELLED":
            raise Conflict(f"{native_id} is {after.status} after cancel_workflow: not paused")
        return (
            "cancel_workflow: DBOS status CANCELLED, recorded by irq as paused; the agent "
            "releases on_pause=release resources when it notices (at its next DBOS call) and "
            "reports them in its final heartbeat",
            ["update_workflow_attributes(irq.intent=pause)", "cancel_workflow"],
        )

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        run_id = self.run_id(native_id)
        detail, operations = await self._database.call(
            self._pause_sync,
            native_id,
            by=identity,
            reason=reason,
            ledger_paused=self._ledger.is_paused(run_id),
        )
        self._ends.paused(run_id)
        return ActionOutcome(detail=detail, operations=operations)

    def _resume_sync(
        self, native_id: str, *, by: str, reason: str, ledger_paused: bool, lost: bool
    ) -> tuple[str, list[str]]:
        status = self._database.status(native_id)
        native = str(status.status)
        if native == "CANCELLED":
            if not paused_by_irq(status, ledger_paused):
                raise Conflict(
                    f"{native_id} was cancelled, which is terminal for irq (DBOS would still "
                    "accept resume_workflow; fork it with DBOS tooling to run it again)"
                )
        elif native == "PENDING":
            if not lost:
                raise Conflict(
                    f"{native_id} is PENDING (executing, or its executor is dead): resuming "
                    "a live run executes its current step twice; resume it only when it is "
                    "lost (no heartbeat)"
                )
        elif native != "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
            raise Conflict(f"{native_id} is {native}: nothing to resume")
        self._write_intent(native_id, "resume", by=by, reason=reason)
        self._database.connected().resume_workflow(native_id)
        after = self._database.status(native_id)
        if after.status not in ACTIVE_STATUSES:
            raise Conflict(f"{native_id} is {after.status} after resume_workflow")
        return (
            f"resume_workflow: {native} -> {after.status}; continues from its last journaled "
            "step (journaled steps replay, the step in flight runs again)",
            ["update_workflow_attributes(irq.intent=resume)", "resume_workflow"],
        )

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Resume a paused run. ``lost=True`` also allows a PENDING run whose agent went silent
        (a forced restart: if it is in fact alive its current step runs twice); the gateway
        should pass it only when its unified state for the run is ``lost``."""
        run_id = self.run_id(native_id)
        detail, operations = await self._database.call(
            self._resume_sync,
            native_id,
            by=identity,
            reason=reason,
            ledger_paused=self._ledger.is_paused(run_id),
            lost=lost,
        )
        # not cleared here: a poll may have read the row (CANCELLED, intent resume) before
        # resume_workflow and map it after this returns; the mark is all that says paused
        self._ends.resumed(run_id)
        return ActionOutcome(detail=detail, operations=operations)

    def _cancel_sync(
        self, native_id: str, *, by: str, reason: str, ledger_paused: bool
    ) -> tuple[str, list[str]]:
        client = self._database.connected()
        status = self._database.status(native_id)
        native = str(status.status)
        if native in ("SUCCESS", "ERROR"):
            raise Conflict(f"{native_id} is {native}: a finished run cannot be cancelled")
        if native == "CANCELLED":
            if not paused_by_irq(status, ledger_paused):
                return "already cancelled", []
            self._write_intent(native_id, "cancel", by=by, reason=reason)
            if not needs_cleanup(attributes_of(status)):
                return (
                    "paused run recorded as cancelled; it kept no resources to release",
                    ["update_workflow_attributes(irq.intent=cancel)"],
                )
            client.resume_workflow(native_id)
            return (
                "paused run resumed once for cleanup (irq.intent=cancel): the agent releases "
                "what it kept while paused (unless on_cancel=keep), reports it, and ends "
                "CANCELLED",
                ["update_workflow_attributes(irq.intent=cancel)", "resume_workflow (cleanup)"],
            )
        self._write_intent(native_id, "cancel", by=by, reason=reason)
        client.cancel_workflow(native_id)
        after = self._database.status(native_id)
        if after.status != "CANCELLED":
            raise Conflict(f"{native_id} is {after.status} after cancel_workflow: not cancelled")
        return (
            "cancel_workflow: DBOS status CANCELLED (terminal for irq); the agent releases "
            "resources not marked on_cancel=keep when it notices, and reports them",
            ["update_workflow_attributes(irq.intent=cancel)", "cancel_workflow"],
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        run_id = self.run_id(native_id)
        detail, operations = await self._database.call(
            self._cancel_sync,
            native_id,
            by=identity,
            reason=reason,
            ledger_paused=self._ledger.is_paused(run_id),
        )
        # cleared at once: irq.intent=cancel, written before any status change, decides
        # without the mark (paused_by_irq), so no read can depend on it any more
        self._ledger.mark_paused(run_id, False)
        return ActionOutcome(detail=detail, operations=operations)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(
            "DBOS has no terminate/kill: cancel_workflow is cooperative (the running step "
            "completes and the agent cleans up). Use cancel, or stop the agent process.",
            target=native_id,
        )
