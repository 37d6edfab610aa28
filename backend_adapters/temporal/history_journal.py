"""A workflow's history as irq journal steps: its activities and its decisions (updates)."""

from __future__ import annotations

from typing import Any

from backend_adapters.temporal.conventions import ERROR_ACTIVITY_CANCELLED
from backend_adapters.temporal.payloads import parse_time
from console.model import JournalStep


def journal_from_history(events: list[dict[str, Any]]) -> list[JournalStep]:
    """Activities (and decisions) as journal steps, in schedule order."""
    steps: dict[str, JournalStep] = {}
    order: list[str] = []
    for event in sorted(events, key=lambda e: int(e.get("eventId") or 0)):
        etype = str(event.get("eventType", "")).removeprefix("EVENT_TYPE_")
        at = parse_time(event.get("eventTime"))
        if etype == "ACTIVITY_TASK_SCHEDULED":
            attrs = event.get("activityTaskScheduledEventAttributes") or {}
            key = str(event.get("eventId"))
            name = (attrs.get("activityType") or {}).get("name", "activity")
            steps[key] = JournalStep(
                index=len(order),
                name=f"{name} (activity {attrs.get('activityId', '?')})",
                status="in_flight",
                started_at=at,
            )
            order.append(key)
            continue
        if etype.startswith("ACTIVITY_TASK_") and etype != "ACTIVITY_TASK_STARTED":
            attr_name = _camel(etype) + "EventAttributes"
            attrs = event.get(attr_name) or {}
            key = str(attrs.get("scheduledEventId") or "")
            step = steps.get(key)
            if step is None or etype == "ACTIVITY_TASK_CANCEL_REQUESTED":
                continue
            step.completed_at = at
            step.status = "completed" if etype == "ACTIVITY_TASK_COMPLETED" else "failed"
            step.detail = etype.removeprefix("ACTIVITY_TASK_").lower()
            failure = attrs.get("failure") or {}
            ftype = (failure.get("applicationFailureInfo") or {}).get("type")
            if ftype == ERROR_ACTIVITY_CANCELLED:
                step.detail = "cancelled on request (agent released its resources)"
            elif failure.get("message"):
                step.detail += f": {failure['message']}"
            continue
        if etype == "WORKFLOW_EXECUTION_UPDATE_COMPLETED":
            attrs = event.get("workflowExecutionUpdateCompletedEventAttributes") or {}
            meta = attrs.get("meta") or {}
            outcome = attrs.get("outcome") or {}
            key = f"update:{meta.get('updateId', event.get('eventId'))}"
            steps[key] = JournalStep(
                index=len(order),
                name=f"decision (update {meta.get('updateId', '?')})",
                status="failed" if "failure" in outcome else "completed",
                started_at=at,
                completed_at=at,
            )
            order.append(key)
    return [steps[k] for k in order]


def _camel(upper_snake: str) -> str:
    head, *rest = upper_snake.lower().split("_")
    return head + "".join(p.capitalize() for p in rest)
