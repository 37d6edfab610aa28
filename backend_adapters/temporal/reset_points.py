"""Where a Temporal workflow can be reset to, read from its history (pure: no I/O).

A reset replays the history before a ``WORKFLOW_TASK_COMPLETED`` event in a new run of the
same workflow id and runs the workflow code again from there: every activity whose result
was recorded before that event keeps it, the others run again. The point before an activity
is the workflow task that scheduled it (``workflowTaskCompletedEventId`` of its
``ACTIVITY_TASK_SCHEDULED``). Activities are indexed and named as ``irq show`` lists them
(``history_journal.py``: activities and decisions, in schedule order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend_adapters.base import InvalidInput

#: written into the reset's reason, which Temporal keeps in the new run's history (the
#: ``WORKFLOW_TASK_FAILED`` event with cause RESET_WORKFLOW): how a repeated retry with the
#: same key is recognised (the server does not deduplicate resets by request id: measured)
RETRY_MARK = "[irq retry {}]"


#: events that prove an attempt ran
_RAN = ("ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "ACTIVITY_TASK_FAILED")


@dataclass
class ActivityStep:
    index: int  # the journal index (``irq show``)
    name: str  # the journal name: "TYPE (activity ID)"
    activity_type: str
    scheduled_id: int
    reset_point: int  # the WORKFLOW_TASK_COMPLETED that scheduled it
    closed_id: int | None = None
    outcome: str = "in_flight"  # completed | failed | timed_out | canceled | in_flight
    started: bool = False  # an attempt ran (its side effects may have happened)


@dataclass
class ResetHistory:
    run_id: str
    status: str  # the WORKFLOW_EXECUTION_* close event type, lower case ('' while running)
    steps: list[ActivityStep]
    last_task_completed: int | None  # the newest WORKFLOW_TASK_COMPLETED event id
    failed_activity: int | None  # scheduled event id of the activity the workflow failed in
    failed_task: int | None  # the workflow task that failed the workflow (its code raised)
    signals: list[int]  # SIGNALED event ids
    retry_keys: dict[str, str]  # request id -> the new run id of a reset irq made


def read_history(run_id: str, events: list[dict[str, Any]]) -> ResetHistory:
    out = ResetHistory(run_id, "", [], None, None, None, [], {})
    by_scheduled: dict[int, ActivityStep] = {}
    index = 0
    for event in sorted(events, key=lambda e: int(e.get("eventId") or 0)):
        eid = int(event.get("eventId") or 0)
        etype = str(event.get("eventType", "")).removeprefix("EVENT_TYPE_")
        if etype == "ACTIVITY_TASK_SCHEDULED":
            attrs = event.get("activityTaskScheduledEventAttributes") or {}
            atype = str((attrs.get("activityType") or {}).get("name", "activity"))
            step = ActivityStep(
                index=index,
                name=f"{atype} (activity {attrs.get('activityId', '?')})",
                activity_type=atype,
                scheduled_id=eid,
                reset_point=int(attrs.get("workflowTaskCompletedEventId") or 0),
            )
            by_scheduled[eid] = step
            out.steps.append(step)
            index += 1
        elif etype == "WORKFLOW_EXECUTION_UPDATE_COMPLETED":
            index += 1  # a decision: a journal step, not a reset point
        elif etype.startswith("ACTIVITY_TASK_") and etype != "ACTIVITY_TASK_CANCEL_REQUESTED":
            ended: dict[str, Any] = next(
                (v for k, v in event.items() if k.endswith("EventAttributes")), {}
            )
            found = by_scheduled.get(int(ended.get("scheduledEventId") or 0))
            if found is None:
                continue
            found.started = (
                found.started or etype in _RAN or str(attrs.get("startedEventId") or "0") != "0"
            )
            if etype != "ACTIVITY_TASK_STARTED":
                found.closed_id = eid
                found.outcome = etype.removeprefix("ACTIVITY_TASK_").lower()
        elif etype == "WORKFLOW_TASK_COMPLETED":
            out.last_task_completed = eid
        elif etype == "WORKFLOW_EXECUTION_SIGNALED":
            out.signals.append(eid)
        elif etype == "WORKFLOW_TASK_FAILED":
            _note_reset(out, event)
        elif etype.startswith("WORKFLOW_EXECUTION_") and _is_close(etype):
            out.status = etype.removeprefix("WORKFLOW_EXECUTION_").lower()
            if etype == "WORKFLOW_EXECUTION_FAILED":
                _note_failure(out, event)
    return out


def _is_close(etype: str) -> bool:
    return etype.removeprefix("WORKFLOW_EXECUTION_") in (
        "COMPLETED",
        "FAILED",
        "TIMED_OUT",
        "CANCELED",
        "TERMINATED",
        "CONTINUED_AS_NEW",
    )


def _note_failure(out: ResetHistory, event: dict[str, Any]) -> None:
    attrs = event.get("workflowExecutionFailedEventAttributes") or {}
    failure = attrs.get("failure") or {}
    info = failure.get("activityFailureInfo")
    if isinstance(info, dict) and info.get("scheduledEventId"):
        out.failed_activity = int(info["scheduledEventId"])
    elif attrs.get("workflowTaskCompletedEventId"):
        out.failed_task = int(attrs["workflowTaskCompletedEventId"])


def _note_reset(out: ResetHistory, event: dict[str, Any]) -> None:
    attrs = event.get("workflowTaskFailedEventAttributes") or {}
    if not str(attrs.get("cause", "")).endswith("RESET_WORKFLOW"):
        return
    reason = str((attrs.get("failure") or {}).get("message") or "")
    head, found, tail = reason.rpartition(RETRY_MARK.format("").rstrip("]"))
    if found and tail.endswith("]"):
        out.retry_keys[tail[:-1]] = str(attrs.get("newRunId") or "")


@dataclass
class ResetChoice:
    event_id: int  # the WORKFLOW_TASK_COMPLETED to reset to
    first: ActivityStep | None  # the first activity that runs again (None: workflow code)
    kept: list[ActivityStep]
    rerun: list[ActivityStep]


def choose_reset(history: ResetHistory, from_step: str | None) -> ResetChoice:
    """The reset point for ``from_step`` (None: the step the run failed in)."""
    if from_step is not None:
        step = find_step(history, from_step)
        return _split(history, step.reset_point, step)
    target: ActivityStep | None = None
    if history.failed_activity is not None:
        target = next((s for s in history.steps if s.scheduled_id == history.failed_activity), None)
    if target is None and history.failed_task is None:
        target = next((s for s in history.steps if s.outcome != "completed"), None)
    if target is not None and target.reset_point:
        return _split(history, target.reset_point, target)
    point = history.failed_task or history.last_task_completed
    if not point:
        raise InvalidInput("no completed workflow task to reset to: start the workflow again")
    return _split(history, point, None)


def find_step(history: ResetHistory, wanted: str) -> ActivityStep:
    """A step by journal index, journal name, activity id or activity type (unique)."""
    text = wanted.strip()
    named = [s for s in history.steps if text in (s.name, str(s.index))]
    if not named:
        named = [s for s in history.steps if s.name.endswith(f"(activity {text})")]
    if not named:
        named = [s for s in history.steps if s.activity_type == text]
    names = ", ".join(f"{s.index}: {s.name}" for s in history.steps) or "none"
    if len(named) > 1:
        raise InvalidInput(f"step {wanted!r} is ambiguous: give its index or full name ({names})")
    if not named:
        raise InvalidInput(f"no activity {wanted!r} in this run (activities: {names})")
    if not named[0].reset_point:
        raise InvalidInput(f"{named[0].name} has no workflow task before it to reset to")
    return named[0]


def _split(history: ResetHistory, point: int, first: ActivityStep | None) -> ResetChoice:
    kept = [s for s in history.steps if s.closed_id is not None and s.closed_id < point]
    rerun = [s for s in history.steps if s not in kept and s.scheduled_id > 0]
    if first is not None:
        rerun = [s for s in rerun if s.index >= first.index or s.scheduled_id < point]
    return ResetChoice(point, first or (rerun[0] if rerun else None), kept, rerun)
