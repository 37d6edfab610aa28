"""Acting on LangGraph threads: pause (= cancel the runs with ``action=interrupt`` + irq's
record), resume from the last checkpoint, cancel; no terminate.

Each action first writes ``irq_intent`` in the thread's metadata (who, why, which runs), so
every gateway reads the same meaning of a stopped thread.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from backend_adapters.base import ActionOutcome, Conflict, NotFound, PauseLedger, Unsupported
from backend_adapters.langgraph.conventions import BACKEND, META_BY, META_INTENT, Intent
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.state_mapping import intent_of, metadata_of, pending_interrupts
from backend_adapters.langgraph.thread_reads import ThreadReads
from backend_adapters.run_records import IntentAction
from console.model import Run

#: Agent Server run statuses that still hold the thread
ACTIVE_RUN_STATUSES = ("pending", "running")


class LangGraphActions:
    """The operator's actions on one Agent Server's threads."""

    def __init__(
        self,
        http: AgentServerHttp,
        threads: ThreadReads,
        ledger: PauseLedger,
        *,
        context: str,
        verify_s: float,
    ) -> None:
        self._http = http
        self._threads = threads
        self._ledger = ledger
        self._context = context
        self._verify_s = verify_s

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self._context, native_id)

    async def _write_intent(
        self, native_id: str, action: IntentAction, *, by: str, reason: str, run_ids: list[str]
    ) -> None:
        intent: Intent = {
            "action": action,
            "by": by,
            "reason": reason,
            "at": datetime.now(UTC).isoformat(),
            "run_id": ",".join(run_ids),
        }
        await self._http.patch_metadata(native_id, {META_INTENT: dict(intent)})

    async def _active_runs(self, native_id: str) -> list[dict[str, Any]]:
        runs = await self._http.runs(native_id, limit=20)
        return [r for r in runs if r.get("status") in ACTIVE_RUN_STATUSES]

    async def _cancel_runs(self, native_id: str, runs: list[dict[str, Any]]) -> list[str]:
        ops = []
        for run in runs:
            rid = str(run["run_id"])
            try:
                await self._http.cancel_run(native_id, rid, action="interrupt")
            except NotFound:
                continue  # finished meanwhile
            ops.append(f"POST /threads/{native_id}/runs/{rid}/cancel?action=interrupt")
        return ops

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        thread = await self._threads.thread(native_id)
        status = thread.get("status")
        intent = intent_of(thread).get("action")
        if status == "interrupted" and not pending_interrupts(thread):
            if intent == "cancel":
                raise Conflict(f"thread {native_id} was cancelled: it cannot be paused")
            self._ledger.mark_paused(self.run_id(native_id), True)
            return ActionOutcome(detail="already stopped (thread interrupted, nothing runs)")
        if status == "interrupted":
            raise Conflict(
                f"thread {native_id} is parked at an interrupt and runs nothing: decide it "
                "or cancel it"
            )
        if status != "busy":
            raise Conflict(f"thread {native_id} is {status}: only a running thread can be paused")
        runs = await self._active_runs(native_id)
        run_ids = [str(r["run_id"]) for r in runs]
        await self._write_intent(native_id, "pause", by=identity, reason=reason, run_ids=run_ids)
        ops = [f"PATCH /threads/{native_id} (irq_intent=pause)"]
        ops += await self._cancel_runs(native_id, runs)
        after = await self._threads.settled(native_id)
        if after.get("status") == "busy":
            raise Conflict(f"thread {native_id} is still busy {self._verify_s:g}s after the cancel")
        self._ledger.mark_paused(self.run_id(native_id), True)
        return ActionOutcome(
            detail=(
                f"cancelled {len(runs)} run(s) with action=interrupt: thread "
                f"{after.get('status')}, checkpoints kept; resume re-runs the node that was in "
                "flight (a synchronous node may still be running its current call)"
            ),
            operations=ops,
        )

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Continue a stopped thread from its checkpoint. ``lost`` changes nothing here: the
        Agent Server itself runs the graph, so a busy thread is never restarted by irq."""
        thread = await self._threads.thread(native_id)
        status = thread.get("status")
        intent = intent_of(thread).get("action")
        if status == "busy":
            raise Conflict(
                f"thread {native_id} is busy: the Agent Server is running it (irq does not "
                "restart a run the server holds; cancel it, then resume)"
            )
        if status != "interrupted" or pending_interrupts(thread):
            raise Conflict(f"thread {native_id} is {status}: nothing to resume")
        if intent == "cancel":
            raise Conflict(f"thread {native_id} was cancelled, which is terminal for irq")
        await self._write_intent(native_id, "resume", by=identity, reason=reason, run_ids=[])
        graph = metadata_of(thread).get("graph_id") or metadata_of(thread).get("assistant_id")
        body = {
            "assistant_id": graph,
            "input": None,
            "multitask_strategy": "reject",
            "metadata": {META_BY: identity},
        }
        created = await self._http.create_run(native_id, body)
        self._ledger.mark_paused(self.run_id(native_id), False)
        return ActionOutcome(
            detail=(
                f"run {created.get('run_id')} continues the thread from its last checkpoint "
                "(the node that was in flight runs again from its start)"
            ),
            operations=[
                f"PATCH /threads/{native_id} (irq_intent=resume)",
                f'POST /threads/{native_id}/runs {{"input": null}}',
            ],
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        thread = await self._threads.thread(native_id)
        status = thread.get("status")
        intent = intent_of(thread).get("action")
        if intent == "cancel" and status != "busy":
            return ActionOutcome(detail="already cancelled")
        if status in ("idle", "error"):
            raise Conflict(f"thread {native_id} is {status}: a finished run cannot be cancelled")
        runs = await self._active_runs(native_id) if status == "busy" else []
        run_ids = [str(r["run_id"]) for r in runs]
        await self._write_intent(native_id, "cancel", by=identity, reason=reason, run_ids=run_ids)
        ops = [f"PATCH /threads/{native_id} (irq_intent=cancel)"]
        self._ledger.mark_paused(self.run_id(native_id), False)
        if status == "busy":
            ops += await self._cancel_runs(native_id, runs)
            await self._threads.settled(native_id)
            detail = (
                f"cancelled {len(runs)} run(s) with action=interrupt (terminal for irq; a "
                "synchronous node may still be running its current call)"
            )
        elif pending_interrupts(thread):
            await self._http.update_state(native_id, {"values": None, "as_node": "__end__"})
            ops.append(f'POST /threads/{native_id}/state {{"values": null, "as_node": "__end__"}}')
            detail = "the pending interrupt(s) resolved without a decision; the thread is done"
        else:
            detail = "the stopped thread is recorded as cancelled (terminal for irq)"
        return ActionOutcome(detail=detail, operations=ops)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(
            "the LangGraph Agent Server has no terminate/kill: a cancel cannot stop a "
            "synchronous node. Use cancel, or restart the server.",
            target=native_id,
        )
