"""Why a workflow failed, which activity Temporal keeps retrying, and which one it gave up on
(pure: no I/O, no clock).

- **failed** (``WORKFLOW_EXECUTION_FAILED`` / ``TIMED_OUT``): :func:`failure_from_history`
  reads the close event of the newest page of history: the innermost cause's type and
  message (an activity's ``ApplicationError`` type, not "Activity task failed"), the activity
  that failed (``activityFailureInfo``) and when; the same page gives the last completed
  activity (``Run.last_step_at``) when it is in it.
- **retrying**: :func:`step_retry` picks the pending activity on the highest attempt >= 2
  that failed before (describe's ``attempt``, ``lastFailure``, ``nextAttemptScheduleTime``;
  while an attempt waits for its backoff the server shows the next attempt's time as
  ``scheduledTime`` and omits ``nextAttemptScheduleTime``).
- **given up**: an activity Temporal paused by a *rule* (``pauseInfo.ruleId``: the
  namespace's workflow rules stopped it, no person did) is the engine giving up: the run is
  ``given_up``. A *manual* pause (``pauseInfo.manual``) is a person's pause, whether made
  through irq (which pauses activities for its own ``pause``) or through Temporal's UI or
  CLI: the run is ``paused`` and ``resume`` unpauses it. Temporal has no other give-up: an
  activity out of retries fails into the workflow code, which decides (and the run fails
  when it does not catch it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from backend_adapters.temporal.payloads import parse_time
from console.run_facts import RunError, StepRetry

if TYPE_CHECKING:  # state_mapping imports this module
    from backend_adapters.temporal.state_mapping import ActivityView

_CLOSE_ATTRIBUTES = {
    "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED": "workflowExecutionFailedEventAttributes",
    "EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT": "workflowExecutionTimedOutEventAttributes",
}


@dataclass(frozen=True)
class ClosedFacts:
    """What the newest page of a closed workflow's history says: why it failed, and when its
    last activity completed (None: not in that page, or none)."""

    run_id: str
    error: RunError | None
    last_step_at: datetime | None


def failure_from_history(run_id: str, events: list[dict[str, Any]]) -> ClosedFacts:
    """``events``: the newest page of history (any order)."""
    ordered = sorted(events, key=lambda e: int(e.get("eventId") or 0), reverse=True)
    error: RunError | None = None
    last_step_at: datetime | None = None
    for event in ordered:
        etype = str(event.get("eventType", ""))
        if error is None and etype in _CLOSE_ATTRIBUTES:
            attrs = event.get(_CLOSE_ATTRIBUTES[etype]) or {}
            error = _error_from_close(etype, attrs, parse_time(event.get("eventTime")))
        if last_step_at is None and etype == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED":
            last_step_at = parse_time(event.get("eventTime"))
    return ClosedFacts(run_id=run_id, error=error, last_step_at=last_step_at)


def _error_from_close(etype: str, attrs: dict[str, Any], at: datetime | None) -> RunError:
    if etype == "EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT":
        return RunError(type="WorkflowTimedOut", message="workflow execution timed out", at=at)
    failure = attrs.get("failure") or {}
    step: str | None = None
    innermost = failure
    while isinstance(innermost, dict):
        info = innermost.get("activityFailureInfo")
        if isinstance(info, dict) and step is None:
            name = (info.get("activityType") or {}).get("name", "activity")
            step = f"{name} (activity {info.get('activityId', '?')})"
        cause = innermost.get("cause")
        if not isinstance(cause, dict):
            break
        innermost = cause
    return RunError(
        type=failure_type(innermost) or failure_type(failure) or "WorkflowFailed",
        message=str(innermost.get("message") or failure.get("message") or ""),
        step=step,
        at=at,
    )


def failure_type(failure: dict[str, Any] | None) -> str:
    """The type Temporal recorded for one failure: the application error's type, or the kind
    of failure (``Timeout:heartbeat``, ``Canceled``, ``Terminated``, ``ServerFailure``)."""
    if not failure:
        return ""
    app = failure.get("applicationFailureInfo")
    if isinstance(app, dict):
        return str(app.get("type") or "ApplicationError")
    timeout = failure.get("timeoutFailureInfo")
    if isinstance(timeout, dict):
        kind = str(timeout.get("timeoutType") or "").removeprefix("TIMEOUT_TYPE_").lower()
        return f"Timeout:{kind}" if kind else "Timeout"
    for key, name in (
        ("canceledFailureInfo", "Canceled"),
        ("terminatedFailureInfo", "Terminated"),
        ("serverFailureInfo", "ServerFailure"),
    ):
        if key in failure:
            return name
    return ""


def step_retry(acts: list[ActivityView]) -> StepRetry | None:
    """The activity Temporal retries after failures (attempt >= 2), the highest attempt
    first."""
    best: StepRetry | None = None
    for act in acts:
        if act.attempt < 2 or act.last_failure is None:
            continue
        if best is not None and best.attempt >= act.attempt:
            continue
        next_at = act.next_attempt_at
        if next_at is None and act.state == "scheduled":
            next_at = act.scheduled_at
        kind = failure_type(act.last_failure)
        message = str(act.last_failure.get("message") or "")
        best = StepRetry(
            step=f"{act.activity_type} (activity {act.activity_id})",
            attempt=act.attempt,
            last_error=f"{kind}: {message}" if kind and message else kind or message,
            next_attempt_at=next_at,
        )
    return best


def paused_by_rule(pause_info: dict[str, Any] | None) -> str | None:
    """The workflow rule that paused an activity (None: not paused, or paused by a person)."""
    if not pause_info or isinstance(pause_info.get("manual"), dict):
        return None
    rule = pause_info.get("ruleId") or (pause_info.get("rule") or {}).get("ruleId")
    return str(rule) if rule else None


def given_up_error(
    step: str, rule: str, failure: dict[str, Any] | None, at: datetime | None
) -> RunError:
    """The RunError of a run whose activity a workflow rule paused."""
    message = str((failure or {}).get("message") or "")
    said = f"paused by workflow rule {rule}"
    return RunError(
        type=failure_type(failure) or "ActivityPaused",
        message=f"{said}: {message}" if message else said,
        step=step,
        at=at,
    )
