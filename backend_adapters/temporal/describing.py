"""Describes of workflows: pending activities, heartbeat samples, heartbeat loss from history.

A describe is the only source of heartbeat facts over the HTTP API; the refresh planner is
told what each one found so the runs whose liveness is in question are described first.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from datetime import datetime, timedelta
from typing import Any

from backend_adapters.base import BackendError, NotFound, Unreachable
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.conventions import progress_fraction
from backend_adapters.temporal.observed_workflows import Described, ObservedWorkflows
from backend_adapters.temporal.payloads import parse_time
from backend_adapters.temporal.request_budget import RefreshPlanner, TokenBucket
from backend_adapters.temporal.state_mapping import (
    ActivityView,
    activities_from_describe,
    activity_state,
    heartbeat_loss_from_history,
    resources_from_details,
)
from console.model import Heartbeat, RunState, utcnow

_MOVING = {
    RunState.LATE,
    RunState.LOST,
    RunState.PAUSING,
    RunState.CANCELLING,
    RunState.BACKING_OFF,
}


class WorkflowDescriber:
    """Describes workflows and records what they show in the observed state."""

    def __init__(
        self,
        connection: TemporalConnection,
        bucket: TokenBucket,
        planner: RefreshPlanner,
        observed: ObservedWorkflows,
    ) -> None:
        self._connection = connection
        self._bucket = bucket
        self._planner = planner
        self._observed = observed

    async def describe_many(self, wids: list[str]) -> None:
        if not wids:
            return
        sem = asyncio.Semaphore(8)

        async def one(wid: str) -> None:
            async with sem:
                try:
                    await self.describe(wid)
                except NotFound:
                    self._observed.listed.pop(wid, None)

        results = await asyncio.gather(*(one(w) for w in wids), return_exceptions=True)
        for result in results:
            if isinstance(result, Unreachable):
                raise result
            if isinstance(result, BaseException) and not isinstance(result, BackendError):
                raise result

    async def describe(self, wid: str) -> dict[str, Any]:
        describe = await self._connection.http.describe_workflow(wid)
        now = utcnow()
        mono = time.monotonic()
        info = describe.get("workflowExecutionInfo") or {}
        acts = activities_from_describe(describe)
        observed = self._observed
        previous = observed.described.get(wid)
        observed.described[wid] = Described(
            info,
            acts,
            now,
            mono,
            workflow_task_waiting_s(describe, now),
            other_pending=len(describe.get("pendingChildren") or [])
            + len(describe.get("pendingNexusOperations") or []),
        )
        for act in acts:
            resources = resources_from_details(act.details)
            if resources:
                observed.manifests[wid] = resources
            if act.heartbeat_at is not None:
                self._sample(wid, act)
        await self._check_heartbeat_loss(wid, describe, previous)
        deadline = None
        moving = False
        late = wid in observed.loss_unasked
        for act in acts:
            beat = act.heartbeat_at or act.last_started_at
            if beat and act.heartbeat_timeout_s and act.state == "started":
                due = beat + timedelta(seconds=act.heartbeat_timeout_s)
                deadline = due if deadline is None else min(deadline, due)
            state = activity_state(act, now)
            moving = moving or state in _MOVING
            late = late or state is RunState.LATE
        self._planner.mark_described(wid, at=mono, deadline_at=deadline, moving=moving, late=late)
        return describe

    def _sample(self, wid: str, act: ActivityView) -> None:
        samples = self._observed.samples.setdefault(wid, deque(maxlen=32))
        assert act.heartbeat_at is not None
        if samples and samples[-1].at == act.heartbeat_at:
            return
        irq = act.irq_details or {}
        samples.append(
            Heartbeat(
                at=act.heartbeat_at,
                seq=int(irq.get("seq") or len(samples) + 1),
                progress=progress_fraction(irq.get("progress")),
                details=act.details if isinstance(act.details, dict) else {"value": act.details},
                resources=resources_from_details(act.details) or None,
            )
        )

    async def _check_heartbeat_loss(
        self, wid: str, describe: dict[str, Any], previous: Described | None
    ) -> None:
        """An activity that timed out with no retry left vanishes from describe: ask history.

        Asked when the workflow has no pending activity and either had one at the previous
        describe or, first seen, has a workflow task waiting (what follows such a timeout, at
        once: a worker that is alive takes it within milliseconds). A run whose activity just
        vanished always gets its history read (charged to the budget, maybe into debt): it is
        what tells ``lost`` from ``running``; a first-seen one waits for a free token and is
        asked at a later describe (its liveness stays in question until then).
        """
        observed = self._observed
        info = describe.get("workflowExecutionInfo") or {}
        if describe.get("pendingActivities") or (
            info.get("status") != "WORKFLOW_EXECUTION_STATUS_RUNNING"
        ):
            observed.lost.pop(wid, None)
            observed.loss_unasked.discard(wid)
            return
        length = int(info.get("historyLength") or 0)
        known = observed.lost.get(wid)
        unasked = wid in observed.loss_unasked
        if known is not None and known[0] == length and not unasked:
            return
        had_activity = previous is not None and bool(previous.activities)
        first_and_waiting = previous is None and workflow_task_waiting_s(describe) is not None
        if not (had_activity or unasked or first_and_waiting or (known is not None and known[1])):
            observed.lost[wid] = (length, None)
            return
        if had_activity or unasked:
            self._bucket.charge()
        elif not self._bucket.try_take():
            observed.loss_unasked.add(wid)
            return
        observed.loss_unasked.discard(wid)
        try:
            page = await self._connection.http.history(wid, reverse=True, page_size=8)
        except NotFound:
            return
        events = (page.get("history") or {}).get("events") or []
        observed.lost[wid] = (length, heartbeat_loss_from_history(events))


def workflow_task_waiting_s(describe: dict[str, Any], now: datetime | None = None) -> float | None:
    """Seconds the workflow's pending workflow task has waited for a worker (None: none)."""
    task = describe.get("pendingWorkflowTask")
    if not isinstance(task, dict):
        return None
    scheduled = parse_time(task.get("scheduledTime") or task.get("originalScheduledTime"))
    if scheduled is None:
        return None
    return max(0.0, ((now or utcnow()) - scheduled).total_seconds())
