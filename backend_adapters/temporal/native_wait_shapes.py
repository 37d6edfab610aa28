"""What a native human wait looks like on Temporal, read from Temporal's own answers (pure).

A workflow written without irq's helpers waits for a person in its own code (Temporal's
samples: ``await workflow.wait_condition(lambda: self.approval is not None, timeout=...)``
until a ``send_approval`` signal or an ``approve`` update arrives). Nothing in Temporal says
"waiting for a person", so irq infers it from three facts:

- nothing pending: no activity, child workflow, Nexus operation or workflow task (describe);
- the history ends in a completed workflow task, followed only by events written with it
  (a timer started, memo / search attribute upserts, markers, completed updates) — the
  workflow ran until it blocked and has nothing scheduled but timers;
- its ``__temporal_workflow_metadata`` lists signal or update definitions (outside irq's
  own ``irq_decide``, whose interrupts the helper discovery finds).

The wait's id is derived from the event where it began (``wait-<event id>``): a signal that
does not end the wait completes a new workflow task and so starts a new wait with a new id,
and a decision for the old one is never applied to it. A timer started with the wait is the
item's deadline (``wait_condition(timeout=...)``). The Python SDK's ``__stack_trace`` shows
only the top-level coroutine, not the ``wait_condition``, so it is not used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from backend_adapters.temporal.conventions import UPDATE_NAME
from backend_adapters.temporal.payloads import parse_duration, parse_time
from console.model import DecisionKind, Interrupt, InterruptHandler, InterruptKind

#: the built-in query every SDK answers with the workflow's handler definitions
METADATA_QUERY = "__temporal_workflow_metadata"
WAIT_PREFIX = "wait-"

_WFT_COMPLETED = "EVENT_TYPE_WORKFLOW_TASK_COMPLETED"
_TIMER_STARTED = "EVENT_TYPE_TIMER_STARTED"
_TIMER_DONE = ("EVENT_TYPE_TIMER_FIRED", "EVENT_TYPE_TIMER_CANCELED")
#: events a completed workflow task writes along with it that leave nothing to run: after
#: them the workflow is still blocked where that task left it
_QUIET_AFTER_TASK = frozenset(
    {
        _TIMER_STARTED,
        "EVENT_TYPE_TIMER_CANCELED",
        "EVENT_TYPE_MARKER_RECORDED",
        "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",
        "EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED",
        "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
        "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED",
    }
)


_DEFINITIONS: tuple[tuple[str, Literal["signal", "update"]], ...] = (
    ("signalDefinitions", "signal"),
    ("updateDefinitions", "update"),
)


@dataclass(frozen=True)
class HandlerDef:
    """One signal or update definition from the workflow's metadata."""

    name: str
    kind: Literal["signal", "update"]
    description: str = ""


def handlers_from_metadata(result: Sequence[Any]) -> tuple[HandlerDef, ...] | None:
    """The signal and update definitions of ``__temporal_workflow_metadata``'s answer.

    None for a workflow that uses irq's helper (its ``irq_decide`` interrupts are found by
    the helper discovery) — and an empty tuple for one with no handlers (never a native wait).
    Built-in handlers (``__...``) are left out."""
    meta = result[0] if result and isinstance(result[0], Mapping) else {}
    definition = meta.get("definition")
    if not isinstance(definition, Mapping):
        return ()
    out: list[HandlerDef] = []
    for key, kind in _DEFINITIONS:
        for item in definition.get(key) or []:
            if not isinstance(item, Mapping):
                continue
            name = str(item.get("name") or "")
            if kind == "update" and name == UPDATE_NAME:
                return None
            if not name or name.startswith("__"):
                continue
            out.append(HandlerDef(name, kind, str(item.get("description") or "")))
    return tuple(out)


@dataclass(frozen=True)
class PendingTimer:
    event_id: int
    timeout_s: float
    fires_at: datetime | None


@dataclass(frozen=True)
class WaitSite:
    """Where a workflow blocked: the completed workflow task, and its pending timers."""

    event_id: int  # the WORKFLOW_TASK_COMPLETED where the wait began
    began_at: datetime | None
    history_length: int
    timers: tuple[PendingTimer, ...] = ()

    @property
    def native_id(self) -> str:
        return f"{WAIT_PREFIX}{self.event_id}"

    @property
    def deadline_at(self) -> datetime | None:
        times = [t.fires_at for t in self.timers if t.fires_at is not None]
        return min(times) if times else None

    def text(self) -> str:
        """``after event #11 WorkflowTaskCompleted; timer #12 (24h) pending``"""
        parts = [f"after event #{self.event_id} WorkflowTaskCompleted"]
        parts += [
            f"timer #{t.event_id} ({short_duration(t.timeout_s)}) pending" for t in self.timers
        ]
        return "; ".join(parts)


def short_duration(seconds: float) -> str:
    """``86400`` -> ``24h``, ``90`` -> ``1m30s``, ``0.5`` -> ``0.5s``."""
    if seconds < 60:
        return f"{seconds:g}s"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{hours}h" if hours else ""
    out += f"{minutes}m" if minutes else ""
    out += f"{secs}s" if secs else ""
    return out


def wait_site_from_history(
    events_newest_first: Sequence[Mapping[str, Any]], history_length: int
) -> WaitSite | None:
    """The wait a workflow is blocked in, from the newest page of its history (reverse).

    None when the history does not end in a completed workflow task followed only by quiet
    events (a workflow task is scheduled or running, a signal just arrived, work is
    scheduled). Timers started in the page and not fired or cancelled there are pending; a
    timer started before the page is not seen (the page holds 20 events: a timer on the same
    wait is started right after it began)."""
    began: Mapping[str, Any] | None = None
    for event in events_newest_first:
        kind = str(event.get("eventType") or "")
        if kind == _WFT_COMPLETED:
            began = event
            break
        if kind not in _QUIET_AFTER_TASK:
            return None
    if began is None:
        return None
    done: set[int] = set()
    timers: list[PendingTimer] = []
    for event in events_newest_first:
        kind = str(event.get("eventType") or "")
        if kind in _TIMER_DONE:
            attrs = _attrs(event)
            done.add(int(attrs.get("startedEventId") or 0))
        elif kind == _TIMER_STARTED:
            eid = int(event.get("eventId") or 0)
            if eid in done:
                continue
            timeout = parse_duration(_attrs(event).get("startToFireTimeout")) or 0.0
            started = parse_time(event.get("eventTime"))
            fires = started + timedelta(seconds=timeout) if started and timeout else None
            timers.append(PendingTimer(eid, timeout, fires))
    return WaitSite(
        event_id=int(began.get("eventId") or 0),
        began_at=parse_time(began.get("eventTime")),
        history_length=history_length,
        timers=tuple(sorted(timers, key=lambda t: t.event_id)),
    )


def _attrs(event: Mapping[str, Any]) -> Mapping[str, Any]:
    for key, value in event.items():
        if key.endswith("EventAttributes") and isinstance(value, Mapping):
            return value
    return {}


def handler_schemas(memo_value: Any) -> dict[str, dict[str, Any]]:
    """The memo ``irq_schemas`` entry: ``{handler name: JSON Schema}`` (others dropped)."""
    if not isinstance(memo_value, Mapping):
        return {}
    return {str(k): dict(v) for k, v in memo_value.items() if isinstance(v, Mapping)}


def wait_interrupt(
    run_id: str,
    workflow_type: str,
    site: WaitSite,
    handlers: Sequence[HandlerDef],
    schemas: Mapping[str, dict[str, Any]],
    *,
    fallback_created_at: datetime,
) -> Interrupt:
    """The inbox item of a native wait: kind ``update`` when an update answers it (validated,
    with a result), else ``signal``; answered with ``respond`` (the payload is the handler's
    argument: irq cannot know what approve or reject would mean to the workflow's code)."""
    names = [h.name for h in handlers]
    kind = InterruptKind.UPDATE if any(h.kind == "update" for h in handlers) else (
        InterruptKind.SIGNAL
    )
    said = "; ".join(f"{h.kind} {h.name}: {h.description}" for h in handlers if h.description)
    return Interrupt(
        id=Interrupt.make_id(run_id, site.native_id),
        run_id=run_id,
        native_id=site.native_id,
        title=f"{workflow_type} waits for {' or '.join(names)}",
        description=(
            "waiting in its own code (no irq helper); answer with respond: the response is "
            "the handler's argument" + (f". {said}" if said else "")
        ),
        action=names[0] if len(names) == 1 else "",
        allowed_decisions=[DecisionKind.RESPOND],
        created_at=site.began_at or fallback_created_at,
        kind=kind,
        handlers=[
            InterruptHandler(
                name=h.name, kind=h.kind, description=h.description, args_schema=schemas.get(h.name)
            )
            for h in handlers
        ],
        deadline_at=site.deadline_at,
        wait_site=site.text(),
    )
