"""Acting on Temporal workflows: pause / resume (per pending activity), cancel, terminate."""

from __future__ import annotations

import uuid
from typing import Any

from backend_adapters.base import ActionOutcome, Conflict
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.describing import WorkflowDescriber
from backend_adapters.temporal.interrupt_discovery import pending_ids
from backend_adapters.temporal.native_waits import NativeWaits
from backend_adapters.temporal.observed_workflows import ObservedWorkflows
from backend_adapters.temporal.state_mapping import ActivityView, activities_from_describe
from console.model import utcnow


class WorkflowActions:
    """The operator's actions on one namespace's workflows; each marks the run to be
    described first on the next poll."""

    def __init__(
        self,
        connection: TemporalConnection,
        describer: WorkflowDescriber,
        observed: ObservedWorkflows,
        native: NativeWaits,
    ) -> None:
        self._connection = connection
        self._describer = describer
        self._observed = observed
        self._native = native

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        describe = await self._describer.describe(native_id)
        self._require_running(native_id, describe)
        acts = activities_from_describe(describe)
        targets = [a for a in acts if not a.paused and a.state in ("started", "scheduled")]
        if not acts:
            waiting = await self._waiting_for_a_person(native_id, describe)
            if waiting:
                return ActionOutcome(
                    detail=f"nothing to pause: {native_id} waits for a person ({waiting}); no "
                    "activity runs, so nothing is stopped and nothing is released; the wait "
                    "stays open (answer it, or cancel the run) and Temporal records no pause",
                    operations=[f"none: nothing runs while it waits ({waiting})"],
                )
        if not targets:
            states = ", ".join(f"{a.activity_id}: {a.state}" for a in acts) or "none"
            raise Conflict(
                f"{native_id}: no activity to pause (pending activities: {states}); Temporal "
                "pauses activities, not the workflow itself",
                target=native_id,
            )
        ops: list[str] = []
        body = {"identity": identity, "reason": reason}
        for act in targets:
            await self._connection.http.activity_command(native_id, act.activity_id, "pause", body)
            ops.append(f"pause activity {act.activity_id} ({act.activity_type})")
        self._observed.mark_dirty(native_id)
        slow = [a.activity_id for a in targets if a.heartbeat_timeout_s is None]
        detail = f"pause requested for {len(targets)} activit{'y' if len(targets) == 1 else 'ies'}"
        if slow:
            detail += "; no heartbeat timeout on " + ", ".join(slow) + ": effective on completion"
        else:
            detail += "; the agent stops at its next heartbeat"
        return ActionOutcome(detail=detail, operations=ops)

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        describe = await self._describer.describe(native_id)
        self._require_running(native_id, describe)
        acts = activities_from_describe(describe)
        paused = [a for a in acts if a.paused or a.state in ("paused", "pause_requested")]
        if paused:
            return await self._unpause(native_id, paused, reason=reason, identity=identity)
        if lost:
            return await self._retry_lost(native_id, describe, acts, identity=identity)
        raise Conflict(f"{native_id}: no paused activity to resume", target=native_id)

    async def _unpause(
        self, native_id: str, targets: list[ActivityView], *, reason: str, identity: str
    ) -> ActionOutcome:
        ops: list[str] = []
        body = {"identity": identity, "reason": reason, "jitter": "0s"}
        for act in targets:
            await self._connection.http.activity_command(
                native_id, act.activity_id, "unpause", body
            )
            ops.append(f"unpause activity {act.activity_id} ({act.activity_type})")
        self._observed.mark_dirty(native_id)
        return ActionOutcome(
            detail=f"resumed {len(targets)} activit{'y' if len(targets) == 1 else 'ies'}: the "
            "next attempt continues from the last heartbeat details",
            operations=ops,
        )

    async def _retry_lost(
        self,
        native_id: str,
        describe: dict[str, Any],
        acts: list[ActivityView],
        *,
        identity: str,
    ) -> ActionOutcome:
        """Resume of a run whose agent went silent: what Temporal can do about it.

        Temporal retries an activity by itself once its heartbeat timeout fires; the attempt
        starts when a worker polls the task queue. An activity waiting for that retry is
        reset ("retry now": no backoff wait, attempt counter back to 1, heartbeat details
        kept, so the agent continues from its last heartbeat). An attempt the server still
        counts as running cannot be hurried: a reset of it takes effect only at its heartbeat
        timeout (measured on the 1.32 dev server), so it is left to that timeout.
        """
        queue = _task_queue(describe)
        waiting = [a for a in acts if a.state == "scheduled"]
        running = [a for a in acts if a.state == "started"]
        if not waiting and not running:
            raise Conflict(
                f"{native_id}: no activity to retry: the last one timed out with no retry "
                "left, so the workflow code handles that failure when a worker polls task "
                f"queue '{queue}' (to run it again, reset the workflow to an earlier event)",
                target=native_id,
            )
        ops: list[str] = []
        said: list[str] = []
        body = {"identity": identity, "jitter": "0s", "resetHeartbeat": False, "keepPaused": False}
        for act in waiting:
            await self._connection.http.activity_command(native_id, act.activity_id, "reset", body)
            ops.append(f"reset activity {act.activity_id} ({act.activity_type})")
            said.append(
                f"activity {act.activity_id} reset: retried now as attempt 1 (was attempt "
                f"{act.attempt}), continuing from its last heartbeat details"
            )
        now = utcnow()
        for act in running:
            due = ""
            if act.heartbeat_at is not None and act.heartbeat_timeout_s:
                left = act.heartbeat_timeout_s - (now - act.heartbeat_at).total_seconds()
                due = f" (in {max(0.0, left):.0f}s)" if left > 0 else " (due now)"
            said.append(
                f"activity {act.activity_id} is retried by the server at its heartbeat "
                f"timeout{due}: nothing to force before then"
            )
        self._observed.mark_dirty(native_id)
        return ActionOutcome(
            detail="; ".join(said) + f"; the attempt starts when a worker polls task queue "
            f"'{queue}'",
            operations=ops,
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        await self._connection.http.cancel_workflow(
            native_id, reason=reason, identity=identity, request_id=str(uuid.uuid4())
        )
        self._observed.cancel_requested.add(native_id)
        self._observed.mark_dirty(native_id)
        return ActionOutcome(
            detail="cancellation requested: the workflow code cleans up; running activities "
            "see it on their next heartbeat",
            operations=["request workflow cancellation"],
        )

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        await self._connection.http.terminate_workflow(native_id, reason=reason, identity=identity)
        self._observed.mark_dirty(native_id)
        return ActionOutcome(
            detail="terminated: no cleanup ran; resources the agent held may leak",
            operations=["terminate workflow"],
        )

    async def _waiting_for_a_person(self, native_id: str, describe: dict[str, Any]) -> str:
        """What ``native_id`` waits for when it waits for a person: an irq interrupt (the
        helper's search attribute) or a native wait (a signal or an update); '' otherwise."""
        info = describe.get("workflowExecutionInfo") or {}
        ids = pending_ids(info)
        if ids:
            return "irq interrupt " + ", ".join(ids)
        site = await self._native.current_site(native_id, describe)
        if site is None:
            return ""
        wtype = str((info.get("type") or {}).get("name") or "")
        names = " or ".join(f"{h.kind} {h.name}" for h in self._native.handlers_of(wtype))
        return f"{names}, {site.text()}"

    def _require_running(self, native_id: str, describe: dict[str, Any]) -> None:
        status = (describe.get("workflowExecutionInfo") or {}).get("status", "")
        if status != "WORKFLOW_EXECUTION_STATUS_RUNNING":
            raise Conflict(
                f"{native_id} is {status.removeprefix('WORKFLOW_EXECUTION_STATUS_').lower()}",
                target=native_id,
            )


def _task_queue(describe: dict[str, Any]) -> str:
    info = describe.get("workflowExecutionInfo") or {}
    queue = info.get("taskQueue")
    return str(queue.get("name", "") if isinstance(queue, dict) else queue or "")
