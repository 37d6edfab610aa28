"""Pure mapping from what DBOS stores to irq's domain model (no I/O).

State map (README.md, "States"):

- PENDING, ENQUEUED, DELAYED -> running (cancelling while irq's cancel intent is being carried
  out); the gateway refines running to late / lost / waiting from heartbeats and interrupts
- SUCCESS -> completed; ERROR -> failed; MAX_RECOVERY_ATTEMPTS_EXCEEDED -> given_up (DBOS
  stopped recovering it; ``irq retry`` resumes it); both carry ``Run.error`` (failures.py)
- CANCELLED -> paused when irq paused it (``irq.intent`` or the pause ledger), else cancelled
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from backend_adapters.dbos.conventions import (
    ACTIVE_STATUSES,
    ATTR_INTENT,
    ATTR_REPORT,
    ATTR_RUN,
    ATTR_STEP,
)
from backend_adapters.interrupt_deadline import deadline_at_of
from console.model import (
    Action,
    DecisionKind,
    Interrupt,
    InterruptPolicy,
    JournalStep,
    Resource,
    Run,
    RunState,
)

BACKEND = "dbos"

_TERMINAL_MAP = {
    "SUCCESS": RunState.COMPLETED,
    "ERROR": RunState.FAILED,
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": RunState.GIVEN_UP,
}

#: a run that started this recently may not have declared itself yet
_DECLARE_GRACE_S = 10.0

#: DBOS bookkeeping rows the journal view hides (irq's own set_event calls among them)
HIDDEN_OPERATIONS = frozenset({"DBOS.setEvent", "DBOS.updateWorkflowAttributes"})


def from_epoch_ms(ms: int | float | None) -> datetime | None:
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(float(ms) / 1000.0, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def attributes_of(status: Any) -> dict[str, Any]:
    attrs = getattr(status, "attributes", None)
    return attrs if isinstance(attrs, dict) else {}


def _dict_attr(attrs: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = attrs.get(key)
    return value if isinstance(value, dict) else {}


def intent_of(attrs: Mapping[str, Any]) -> str | None:
    action = _dict_attr(attrs, ATTR_INTENT).get("action")
    return action if isinstance(action, str) else None


#: how much later than the cancel a resume intent must be dated to say the resume has not
#: applied yet: DBOS dates rows by the database's clock, on SQLite before Python 3.12 to the
#: second, and irq dates intents by the gateway's
RESUME_PENDING_MARGIN_MS = 1000


def paused_by_irq(status: Any, ledger_paused: bool) -> bool:
    """Whether a CANCELLED workflow is paused: the ``irq.intent`` attribute (written by
    whichever gateway acted last, before it cancelled) decides; without one, the ledger.

    A resume writes its intent before ``resume_workflow``, so CANCELLED with intent
    ``resume`` is either a resume in progress (still paused) or a run resumed and then
    cancelled outside irq. The gateway that resumes keeps its ledger mark until a poll read
    the run resumed (``pause_ends.py``); any gateway, whatever its ledger, also reads the row
    itself: ``resume_workflow`` clears ``completed_at`` and a later cancel sets it again, so
    an intent dated after the cancel that set ``completed_at`` means the resume has not
    applied yet (:func:`resume_pending`)."""
    if status.status != "CANCELLED":
        return False
    attrs = attributes_of(status)
    intent = intent_of(attrs)
    if intent in ("pause", "cancel"):
        return intent == "pause"
    return ledger_paused or (intent == "resume" and resume_pending(attrs, status.completed_at))


def resume_pending(attrs: Mapping[str, Any], completed_at_ms: int | None) -> bool:
    """Whether a CANCELLED row's resume intent is dated after the cancel (``completed_at``,
    epoch ms) by :data:`RESUME_PENDING_MARGIN_MS` or more: the resume has not applied."""
    at = parse_iso(_dict_attr(attrs, ATTR_INTENT).get("at"))
    if at is None or completed_at_ms is None:
        return False
    return at.timestamp() * 1000 - completed_at_ms >= RESUME_PENDING_MARGIN_MS


def needs_cleanup(attrs: dict[str, Any]) -> bool:
    """Whether a paused run still holds resources that a cancel must release."""
    report = attrs.get(ATTR_REPORT)
    report = report if isinstance(report, dict) else {}
    declared = attrs.get(ATTR_RUN)
    declared = declared if isinstance(declared, dict) else {}
    if not declared:
        return False  # not an irq agent: nothing would honour the cleanup intent
    entries = report.get("resources") or declared.get("resources") or []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("on_cancel") == "keep":
            continue
        if entry.get("state", "held") == "held":
            return True
    return False


def state_of(native: str, *, paused: bool, intent: str | None) -> RunState:
    if native in ACTIVE_STATUSES:
        return RunState.CANCELLING if intent == "cancel" else RunState.RUNNING
    if native == "CANCELLED":
        return RunState.PAUSED if paused else RunState.CANCELLED
    return _TERMINAL_MAP.get(native, RunState.RUNNING)


def resources_of(attrs: Mapping[str, Any]) -> list[Resource]:
    """The agent's last report if it made one, else its declaration (state ``held``)."""
    report = _dict_attr(attrs, ATTR_REPORT).get("resources")
    declared = _dict_attr(attrs, ATTR_RUN).get("resources")
    entries = report if isinstance(report, list) else declared
    out: list[Resource] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        try:
            out.append(Resource.model_validate(entry))
        except ValueError:
            continue
    return out


def in_flight_step_of(attrs: Mapping[str, Any], native: str) -> str | None:
    """The step the agent marked as started and not yet journaled, for running or paused runs."""
    if native not in ACTIVE_STATUSES and native != "CANCELLED":
        return None
    marker = _dict_attr(attrs, ATTR_STEP)
    name = marker.get("name")
    if not isinstance(name, str) or marker.get("ended_at_ms"):
        return None
    return name


#: what DBOS uses as the application version when none is configured: the MD5 hex digest of
#: the workflow sources (seen on a real database: '243a69f0321aff8d5f32d4504992cc29'), or
#: ``DEFAULT_VERSION-<app>`` when the source cannot be read (dbos 3.4.0 ``compute_app_version``)
_DERIVED_VERSION = re.compile(r"[0-9a-f]{32}|DEFAULT_VERSION(-.*)?")


def version_pinned(app_version: Any) -> bool | None:
    """Was the run's application version chosen (pinned) or derived from the code? None when
    the status carries no version."""
    if not isinstance(app_version, str) or not app_version:
        return None
    return _DERIVED_VERSION.fullmatch(app_version) is None


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def run_from_status(
    status: Any,
    *,
    context: str,
    paused: bool,
    interrupt: Interrupt | None = None,
) -> Run:
    """One DBOS WorkflowStatus (listed with load_input/load_output False) as an irq Run."""
    wid: str = status.workflow_id
    native: str = str(status.status)
    attrs = attributes_of(status)
    declaration = _dict_attr(attrs, ATTR_RUN)
    intent = intent_of(attrs)
    run_id = Run.make_id(BACKEND, context, wid)
    attempts = getattr(status, "recovery_attempts", None)
    marker = _dict_attr(attrs, ATTR_STEP)
    warnings: list[str] = []
    created = from_epoch_ms(getattr(status, "created_at", None))
    settled = created is None or (datetime.now(UTC) - created).total_seconds() > _DECLARE_GRACE_S
    if native == "PENDING" and not declaration and settled:
        warnings.append(
            "no irq declaration (irq.run): the agent does not use irq's DBOS helpers; "
            "resources and heartbeat cadence unknown"
        )
    details: dict[str, Any] = {
        "executor_id": getattr(status, "executor_id", None),
        "app_version": getattr(status, "app_version", None),
        "queue_name": getattr(status, "queue_name", None),
        "recovery_attempts": attempts,
    }
    if intent:
        details["intent"] = _dict_attr(attrs, ATTR_INTENT)
    if marker.get("started_at_ms"):
        details["step_started_at"] = _iso(from_epoch_ms(marker.get("started_at_ms")))
    report = _dict_attr(attrs, ATTR_REPORT)
    if report.get("phase"):
        details["agent_phase"] = report.get("phase")
    recoveries = report.get("recoveries")
    recoveries = recoveries if isinstance(recoveries, int) else 0
    if report.get("execution"):
        details["executions"] = report.get("execution")
        details["recoveries"] = recoveries
    updated = from_epoch_ms(getattr(status, "updated_at", None))
    app_version = getattr(status, "app_version", None)
    return Run(
        id=run_id,
        backend=BACKEND,
        context=context,
        native_id=wid,
        name=str(declaration.get("name") or status.name or ""),
        state=state_of(native, paused=paused, intent=intent),
        native_state=native,
        heartbeat_interval_s=_float_or_none(declaration.get("interval_s")),
        heartbeat_timeout_s=_float_or_none(declaration.get("timeout_s")),
        resources=resources_of(attrs),
        interrupts=[interrupt.id] if interrupt else [],
        warnings=warnings,
        started_at=created,
        updated_at=updated or datetime.now(UTC),
        # recovered after its executor died: DBOS counts attempts for runs it started
        # directly; a queued run is re-queued with its count reset, so the agent's own
        # count of executions that ended without a report covers that case
        preempted=(isinstance(attempts, int) and attempts > 1) or recoveries > 0,
        attempt=attempts if isinstance(attempts, int) else None,
        in_flight_step=in_flight_step_of(attrs, native),
        # the agent's marker of its last step, when that step ended well (failures.py reads
        # the journal of failed runs; a running run's journal is not read every poll)
        last_step_at=None if marker.get("failed") else from_epoch_ms(marker.get("ended_at_ms")),
        # a queued or delayed run has not started: nothing runs that could heartbeat
        heartbeat_expected=native not in ("ENQUEUED", "DELAYED"),
        app_version=app_version if isinstance(app_version, str) and app_version else None,
        version_pinned=version_pinned(app_version),
        action_notes=_action_notes(app_version),
        details=details,
    )


def _action_notes(app_version: Any) -> dict[Action, list[str]]:
    """What resume means on DBOS for this run's version (dbos.md §4: resume_workflow re-queues
    it on its own application version; an executor of another version never dequeues it)."""
    if not isinstance(app_version, str) or not app_version:
        return {}
    return {
        Action.RESUME: [
            f"DBOS re-queues it on application version {app_version}: only an executor "
            "running that version picks it up"
        ]
    }


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def interrupt_from_payload(payload: Any, *, run_id: str) -> Interrupt | None:
    """The ``irq.interrupt`` event value as an Interrupt; None when absent or malformed."""
    if not isinstance(payload, dict):
        return None
    native = payload.get("interrupt_id")
    if not isinstance(native, str) or not native:
        return None
    allowed: list[DecisionKind] = []
    for kind in payload.get("allowed_decisions") or ["approve", "reject"]:
        try:
            allowed.append(DecisionKind(kind))
        except ValueError:
            continue
    args = payload.get("args")
    schema = payload.get("args_schema")
    return Interrupt(
        id=Interrupt.make_id(run_id, native),
        run_id=run_id,
        native_id=native,
        title=str(payload.get("title") or payload.get("action") or "decision requested"),
        description=str(payload.get("description") or ""),
        action=str(payload.get("action") or ""),
        args=args if isinstance(args, dict) else {},
        args_schema=schema if isinstance(schema, dict) else None,
        allowed_decisions=allowed or [DecisionKind.APPROVE, DecisionKind.REJECT],
        created_at=parse_iso(payload.get("created_at")) or datetime.now(UTC),
        policy=InterruptPolicy.from_payload(payload.get("policy")),
        deadline_at=deadline_at_of(payload.get("deadline_at")),  # with a rule's: the earliest
    )


# ------------------------------------------------------------------------------- journal


def _step_detail(step: Mapping[str, Any]) -> str:
    if step.get("error") is not None:
        return f"error: {step['error']!r}"[:500]
    if step.get("child_workflow_id"):
        return f"child workflow {step['child_workflow_id']}"
    return ""


def _decision_summary(message: Any) -> str:
    if isinstance(message, dict) and message.get("type"):
        by = f" by {message['by']}" if message.get("by") else ""
        return f"received {message['type']}{by}"
    return "received a message"


def journal_from_steps(
    steps: Iterable[Mapping[str, Any]],
    *,
    native: str,
    marker: Mapping[str, Any] | None,
    paused: bool = True,
) -> list[JournalStep]:
    """DBOS's completed steps as irq journal steps, plus the step in flight.

    - irq's own bookkeeping (``DBOS.setEvent``, attribute updates) is hidden;
    - the ``DBOS.sleep`` each ``recv(timeout)`` writes is hidden (it is journaled when the
      recv starts, so a recv still waiting shows only as its sleep); consecutive
      ``DBOS.recv`` polls collapse into one "wait for decision" step, in flight while the run
      still waits;
    - the step in flight is not in DBOS's list: it comes from the agent's ``irq.step`` marker
      when that step has no journaled result yet (after a pause it runs again on resume;
      ``paused=False`` says a CANCELLED run was cancelled for good).
    """
    ordered = sorted(steps, key=lambda s: int(s.get("function_id") or 0))
    recv_ids = {int(s["function_id"]) for s in ordered if s.get("function_name") == "DBOS.recv"}
    journaled = {int(s.get("function_id") or 0) for s in ordered}
    out: list[JournalStep] = []
    wait: dict[str, Any] | None = None  # the open group of recv polls
    waiting_since: Mapping[str, Any] | None = None  # sleep row of a recv still waiting
    for step in ordered:
        fid = int(step.get("function_id") or 0)
        name = str(step.get("function_name") or "")
        if name in HIDDEN_OPERATIONS:
            continue
        if name == "DBOS.sleep" and (fid - 1 in recv_ids or fid - 1 not in journaled):
            # the timeout bookkeeping of a recv (journaled at its start, so it shows up
            # before the recv itself while that recv is still waiting)
            waiting_since = step if fid - 1 not in journaled else None
            continue
        waiting_since = None
        if name == "DBOS.recv":
            if wait is None or wait["closed"]:
                wait = {"index": fid, "polls": 0, "first": step, "last": step, "closed": False}
                out.append(JournalStep(index=fid, name="wait for decision", status="completed"))
            wait["polls"] += 1
            wait["last"] = step
            if step.get("output") is not None:
                wait["closed"] = True
                wait["message"] = step.get("output")
            out[-1] = _wait_step(wait)
            continue
        if wait is not None:
            wait["closed"] = True
        status: Literal["failed", "completed"] = (
            "failed" if step.get("error") is not None else "completed"
        )
        label = {"DBOS.sleep": "sleep (DBOS.sleep)", "DBOS.getResult": "await child result"}
        out.append(
            JournalStep(
                index=fid,
                name=label.get(name, name),
                status=status,
                started_at=from_epoch_ms(step.get("started_at_epoch_ms")),
                completed_at=from_epoch_ms(step.get("completed_at_epoch_ms")),
                detail=_step_detail(step),
            )
        )
    unfinished = native in ACTIVE_STATUSES or native == "CANCELLED"
    marked = _marked_in_flight(marker, journaled, native, paused)
    if marked is not None:
        out.append(marked)
    elif unfinished and waiting_since is not None and not (wait and not wait["closed"]):
        # the first poll of a wait is still running: nothing of it is journaled but its sleep
        fid = int(waiting_since.get("function_id") or 1) - 1
        wait = {"index": fid, "polls": 0, "closed": False}
        out.append(
            JournalStep(
                index=fid,
                name="wait for decision",
                status="completed",
                started_at=from_epoch_ms(waiting_since.get("started_at_epoch_ms")),
            )
        )
    if (
        marked is None
        and unfinished
        and wait
        and not wait["closed"]
        and out
        and (out[-1].index == wait["index"])
    ):
        if native in ACTIVE_STATUSES:
            waiting = "waiting for a decision"
        elif paused:
            waiting = "was waiting for a decision when paused; waits again on resume"
        else:
            waiting = "was waiting for a decision when cancelled"
        out[-1] = out[-1].model_copy(
            update={
                "status": "in_flight",
                "completed_at": None,
                "detail": f"{waiting} ({wait['polls']} polls so far)",
            }
        )
    return out


def _wait_step(wait: Mapping[str, Any]) -> JournalStep:
    message = wait.get("message")
    detail = f"{wait['polls']} poll(s)"
    detail += f"; {_decision_summary(message)}" if message is not None else "; no decision yet"
    return JournalStep(
        index=wait["index"],
        name="wait for decision",
        status="completed",
        started_at=from_epoch_ms(wait["first"].get("started_at_epoch_ms")),
        completed_at=from_epoch_ms(wait["last"].get("completed_at_epoch_ms")),
        detail=detail,
    )


def _marked_in_flight(
    marker: Mapping[str, Any] | None, journaled: set[int], native: str, paused: bool
) -> JournalStep | None:
    if not marker or (native not in ACTIVE_STATUSES and native != "CANCELLED"):
        return None
    fid = marker.get("function_id")
    name = marker.get("name")
    if not isinstance(fid, int) or not isinstance(name, str) or fid in journaled:
        return None
    if native in ACTIVE_STATUSES:
        detail = "running (at-least-once: runs again if interrupted)"
    elif paused:
        detail = "interrupted by the pause: runs again on resume (at-least-once)"
    else:
        detail = "interrupted by the cancel: its result was discarded"
    return JournalStep(
        index=fid,
        name=name,
        status="in_flight",
        started_at=from_epoch_ms(marker.get("started_at_ms")),
        detail=detail,
    )
