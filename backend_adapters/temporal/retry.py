"""``retry`` on Temporal: a workflow reset to the workflow task before a step.

The reset (``POST …/workflows/{wid}/reset``) starts a new run of the same workflow id that
replays the history before that workflow task: activities whose results were recorded
before it keep them and do not run again (measured: the first two activities of a failed
three-step workflow ran once), the workflow code runs again from there (it is deterministic,
so it takes the same path), and the activities from there on execute again — whatever side
effects they had the first time happen again unless they are idempotent. Signals received
after the point are applied again (``RESET_REAPPLY_TYPE_SIGNAL``); a cancel request is not.

Idempotency: Temporal does not deduplicate resets by request id once the first reset's run
exists (measured on 1.32: a second reset with the same ``requestId`` made a third run), so
the command's key goes into the reset reason, which the new run's history keeps
(``reset_points.RETRY_MARK``); a retry whose key the current run's history already carries
does nothing.

A workflow given up by the engine (an activity paused by a workflow rule) is still running:
its retry resets those activities (attempts back to 1) and unpauses them, in place.
"""

from __future__ import annotations

from typing import Any

from backend_adapters.base import Conflict
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.observed_workflows import ObservedWorkflows, run_id_of
from backend_adapters.temporal.reset_points import (
    RETRY_MARK,
    ResetChoice,
    ResetHistory,
    choose_reset,
    read_history,
)
from backend_adapters.temporal.run_failures import paused_by_rule
from backend_adapters.temporal.state_mapping import activities_from_describe
from console.run_facts import RetryOutcome, RetryPlan

RESET_ROUTE = "POST /api/v1/namespaces/{ns}/workflows/{wid}/reset"
_PAGES = 20  # at most 20 pages of 500 events


class WorkflowRetry:
    """Plans and makes the reset that retries one workflow."""

    def __init__(self, connection: TemporalConnection, observed: ObservedWorkflows) -> None:
        self._connection = connection
        self._observed = observed

    async def plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        describe, history = await self._read(native_id)
        given_up = _given_up(describe)
        if given_up:
            return _given_up_plan(given_up)
        self._require_closed(native_id, describe)
        return _plan(choose_reset(history, from_step), history)

    async def retry(
        self,
        native_id: str,
        *,
        from_step: str | None,
        request_id: str,
        reason: str,
        identity: str,
    ) -> RetryOutcome:
        describe, history = await self._read(native_id)
        done = history.retry_keys.get(request_id)
        if done is not None:
            return RetryOutcome(
                detail=f"already retried by request {request_id}: run {done or '?'} of "
                f"workflow {native_id} carries it; nothing sent",
                operations=[],
            )
        given_up = _given_up(describe)
        if given_up:
            return await self._unpause_given_up(native_id, given_up, identity=identity)
        self._require_closed(native_id, describe)
        choice = choose_reset(history, from_step)
        answer = await self._connection.http.reset_workflow(
            native_id,
            run_id=history.run_id,
            event_id=choice.event_id,
            reason=f"{reason} {RETRY_MARK.format(request_id)}".strip(),
            request_id=request_id,
            identity=identity,
        )
        new_run = str(answer.get("runId") or "")
        self._observed.closed.pop(native_id, None)  # the new run is running
        self._observed.mark_dirty(native_id)
        kept = ", ".join(s.name for s in choice.kept) or "none"
        again = ", ".join(s.name for s in choice.rerun) or "the workflow code only"
        return RetryOutcome(
            detail=f"reset workflow {native_id}: new run {new_run} of the same workflow id "
            f"(replaces run {history.run_id}); results kept: {kept}; runs again: {again}",
            operations=[_reset_operation(history, choice)],
        )

    async def _read(self, native_id: str) -> tuple[dict[str, Any], ResetHistory]:
        http = self._connection.http
        describe = await http.describe_workflow(native_id)
        run_id = run_id_of(describe.get("workflowExecutionInfo") or {})
        events: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(_PAGES):
            page = await http.history(
                native_id, page_size=500, next_page_token=token, run_id=run_id
            )
            events.extend((page.get("history") or {}).get("events") or [])
            token = page.get("nextPageToken") or None
            if not token:
                break
        return describe, read_history(run_id, events)

    def _require_closed(self, native_id: str, describe: dict[str, Any]) -> None:
        status = str((describe.get("workflowExecutionInfo") or {}).get("status") or "")
        state = status.removeprefix("WORKFLOW_EXECUTION_STATUS_").lower()
        if state == "running":
            raise Conflict(
                f"{native_id} is still running: nothing to retry yet. A reset would terminate "
                "the running attempt; to stop it first use cancel (or terminate), to get a "
                "stuck activity going use pause and resume (resume of a lost run retries it "
                "now), then retry once it has failed",
                target=native_id,
            )
        if state in ("completed", "continued_as_new"):
            raise Conflict(
                f"{native_id} {state.replace('_', ' ')}: nothing to retry", target=native_id
            )

    async def _unpause_given_up(
        self, native_id: str, activity_ids: list[str], *, identity: str
    ) -> RetryOutcome:
        body = {"identity": identity, "resetHeartbeat": False, "keepPaused": False, "jitter": "0s"}
        for aid in activity_ids:
            await self._connection.http.activity_command(native_id, aid, "reset", body)
        self._observed.mark_dirty(native_id)
        return RetryOutcome(
            detail=f"reset and unpaused activit{'y' if len(activity_ids) == 1 else 'ies'} "
            f"{', '.join(activity_ids)} of {native_id} (a workflow rule had paused them): "
            "retried now as attempt 1, in the same run",
            operations=[f"reset activity {a} (keepPaused=false)" for a in activity_ids],
        )


def _given_up(describe: dict[str, Any]) -> list[str]:
    """Activities of a running workflow that a workflow rule paused."""
    info = describe.get("workflowExecutionInfo") or {}
    if info.get("status") != "WORKFLOW_EXECUTION_STATUS_RUNNING":
        return []
    return [
        a.activity_id
        for a in activities_from_describe(describe)
        if a.paused and paused_by_rule(a.pause_info)
    ]


def _given_up_plan(activity_ids: list[str]) -> RetryPlan:
    return RetryPlan(
        from_step=f"activity {activity_ids[0]}",
        will_rerun=[f"activity {a}" for a in activity_ids],
        unjournaled_effects=[f"activity {a}" for a in activity_ids],
        operations=[
            f"POST /api/v1/namespaces/{{ns}}/workflows/{{wid}}/activities/{a}/reset "
            "(keepPaused=false: attempt 1, unpaused)"
            for a in activity_ids
        ],
        warnings=["a workflow rule paused these activities: they run again in the same run"],
        new_run=False,
        any_step=False,
    )


def _plan(choice: ResetChoice, history: ResetHistory) -> RetryPlan:
    effects = [s.name for s in choice.rerun if s.started]
    warnings: list[str] = []
    if effects:
        warnings.append(
            "will run again: " + ", ".join(effects) + " ran before; whatever side effects "
            "they had happen again unless they are idempotent"
        )
    later = [s for s in history.signals if s > choice.event_id]
    if later:
        warnings.append(f"{len(later)} signal(s) received after the reset point are applied again")
    if history.status == "canceled":
        warnings.append("the cancel request is not carried over: the new run runs to its end")
    warnings.append("a worker polling the workflow's task queue runs the new run")
    return RetryPlan(
        from_step=choice.first.name if choice.first else None,
        steps_kept=[s.name for s in choice.kept],
        will_rerun=[s.name for s in choice.rerun],
        unjournaled_effects=effects,
        operations=[_reset_operation(history, choice)],
        warnings=warnings,
        new_run=True,
        any_step=True,
    )


def _reset_operation(history: ResetHistory, choice: ResetChoice) -> str:
    return (
        f"{RESET_ROUTE} (run {history.run_id}, workflowTaskFinishEventId={choice.event_id}, "
        "requestId=the command's key, reapply signals): a new run of the same workflow id"
    )
