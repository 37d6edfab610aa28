"""Restate rows (``sys_invocation``, ``sys_journal``, ``sys_journal_events``) -> irq's Run,
JournalStep and Interrupt. Pure functions; measured behaviour in docs/backends/restate.md.
The journal itself is read by ``journal_view.py``; waits written with Restate's own idioms
(awakeables, workflow promises) become interrupts in ``native_waits.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from backend_adapters.interrupt_deadline import deadline_at_of
from backend_adapters.restate.conventions import BACKEND, PublishedInterrupt
from backend_adapters.restate.failures import (
    PauseEvent,
    completion_error,
    first_line,
    given_up,
    given_up_error,
    last_step_at,
    step_retry,
)
from backend_adapters.restate.journal_view import JournalView, read_journal
from backend_adapters.restate.native_waits import native_interrupts
from backend_adapters.restate.row_values import parse_duration, parse_time
from console.model import (
    Action,
    DecisionKind,
    Interrupt,
    InterruptPolicy,
    Run,
    RunState,
    utcnow,
)
from console.run_facts import RunError

__all__ = [
    "JournalView",
    "interrupt_of",
    "parse_duration",
    "parse_time",
    "read_journal",
    "run_from_row",
]


def interrupt_of(item: PublishedInterrupt, *, run_id: str) -> Interrupt:
    allowed = []
    for name in item.get("allowed_decisions") or ["approve", "reject"]:
        try:
            allowed.append(DecisionKind(name))
        except ValueError:
            continue
    native = str(item.get("awakeable_id"))
    created = parse_time(item.get("created_at"))
    schema = item.get("args_schema")
    return Interrupt(
        id=Interrupt.make_id(run_id, native),
        run_id=run_id,
        native_id=native,
        title=str(item.get("title") or "decision requested"),
        description=str(item.get("description") or ""),
        action=str(item.get("action") or ""),
        args=dict(item.get("args") or {}),
        args_schema=schema if isinstance(schema, dict) else None,
        allowed_decisions=allowed or [DecisionKind.APPROVE, DecisionKind.REJECT],
        created_at=created or utcnow(),
        policy=InterruptPolicy.from_payload(item.get("policy")),
        deadline_at=deadline_at_of(item.get("deadline_at")),  # with a rule's: the earliest
    )


ACTION_NOTES: dict[Action, list[str]] = {
    Action.PAUSE: [
        "Restate pauses once the ctx.run in flight returns (it is not interrupted); a "
        "suspended invocation cannot be paused (nothing runs)"
    ],
    Action.RESUME: ["resume = retry now: the in-flight ctx.run runs again from its start"],
    Action.CANCEL: [
        "the handler gets TerminalError('cancelled') at its current await and may release "
        "resources; a running ctx.run body is not stopped",
        "on a backing-off invocation the cancel waits for the next retry: irq sends resume "
        "right after it",
    ],
    Action.TERMINATE: [
        "kill: no cleanup code runs, a running side effect is not stopped, resources marked "
        "release are at risk"
    ],
    Action.RETRY: [
        "given up: resume in place, the failing ctx.run runs again; failed, cancelled or "
        "killed: restart-as-new from a journal entry, a new invocation that keeps the "
        "ctx.run results before it",
        "handler code outside ctx.run is not journaled: it runs again on every replay",
    ],
}


def run_from_row(
    row: dict[str, Any],
    *,
    context: str,
    journal: JournalView | None,
    pause: PauseEvent | None,
    service: dict[str, Any] | None,
    pause_requested: bool = False,
    paused_by_irq: bool = False,
) -> tuple[Run, list[Interrupt]]:
    """``pause_requested``: irq asked for a pause that is not in effect yet (pausing);
    ``paused_by_irq``: a ``paused`` invocation is paused because irq asked (not given up)."""
    inv = str(row["id"])
    run_id = Run.make_id(BACKEND, context, inv)
    status = str(row.get("status") or "")
    details: dict[str, Any] = {"target": row.get("target"), "restate_status": status}
    warnings: list[str] = []
    interrupts: list[Interrupt] = []
    error = completion_error(row, journal) if status == "completed" else None
    heartbeat_expected = True
    pending = journal.pending() if journal else []
    native = native_interrupts(row, journal, service, run_id=run_id) if journal else []
    if status == "completed":
        failure = str(row.get("completion_failure") or "")
        heartbeat_expected = False
        if row.get("completion_result") == "success":
            state = RunState.COMPLETED
        elif "cancelled" in failure:
            state = RunState.CANCELLED
        elif "killed" in failure:
            state = RunState.TERMINATED
        else:
            state = RunState.FAILED
        if failure:
            details["completion_failure"] = failure
    elif status == "paused":
        heartbeat_expected = False
        state, error = _paused(row, pause, paused_by_irq, details, warnings)
    elif status == "backing-off":
        state = RunState.BACKING_OFF
        heartbeat_expected = False
        details["next_retry_at"] = row.get("next_retry_at")
        details["last_failure"] = row.get("last_failure")
        details["last_failure_code"] = row.get("last_failure_error_code")
        code = f" ({details['last_failure_code']})" if details["last_failure_code"] else ""
        warnings.append(
            f"backing off after attempt {row.get('retry_count') or '?'}: "
            f"{first_line(row.get('last_failure'))}{code}; next retry at "
            f"{row.get('next_retry_at') or '?'} (resume retries now)"
        )
    elif pause_requested and status == "running":
        # Restate pauses once the ctx.run in flight returns; until then irq says pausing
        state = RunState.PAUSING
    elif pending or native:
        state = RunState.WAITING
        # a native wait alone runs nothing: no heartbeat is due while it waits
        heartbeat_expected = status == "running" and bool(
            pending or (journal and journal.in_flight))
    else:
        state = RunState.RUNNING
        heartbeat_expected = status == "running"
    if state is RunState.WAITING or (not state.terminal and (pending or native)):
        interrupts = [interrupt_of(item, run_id=run_id) for item in pending] + native
    if status == "suspended":
        details["suspended_waiting_for_signals"] = row.get("suspended_waiting_for_signals")
    inactivity = parse_duration((service or {}).get("inactivity_timeout"))
    abort = parse_duration((service or {}).get("abort_timeout"))
    pinned = row.get("pinned_deployment_id")
    retry = row.get("retry_count")
    run = Run(
        id=run_id,
        backend=BACKEND,
        context=context,
        native_id=inv,
        name=str(row.get("target") or ""),
        state=state,
        native_state=status + (f" ({details['completion_failure']})" if "completion_failure"
                               in details else ""),
        interrupts=[i.id for i in interrupts],
        warnings=warnings,
        started_at=parse_time(row.get("created_at")),
        updated_at=parse_time(row.get("modified_at")) or parse_time(row.get("created_at"))
        or datetime.now().astimezone(),
        attempt=int(retry) if isinstance(retry, int) else None,
        in_flight_step=journal.in_flight if journal and not state.terminal else None,
        heartbeat_expected=heartbeat_expected,
        abort_timeout_s=(inactivity + abort) if inactivity is not None and abort is not None
        else None,
        app_version=str(pinned or row.get("last_attempt_deployment_id") or "") or None,
        version_pinned=True if pinned else None,
        checkpointer="restate",
        action_notes={a: list(n) for a, n in ACTION_NOTES.items()},
        error=error,
        retrying=step_retry(row, journal),
        last_step_at=last_step_at(journal),
        details={k: v for k, v in details.items() if v is not None},
    )
    return run, interrupts


def _paused(
    row: dict[str, Any], pause: PauseEvent | None, paused_by_irq: bool,
    details: dict[str, Any], warnings: list[str],
) -> tuple[RunState, RunError | None]:
    """A ``paused`` invocation: given up by Restate (its retries ran out) or paused."""
    if given_up(row, pause, paused_by_irq=paused_by_irq) and pause is not None:
        details["paused_because"] = pause.reason
        warnings.append(
            f"paused by Restate: {pause.reason}; irq retry resumes it from the failing step"
        )
        return RunState.GIVEN_UP, given_up_error(pause)
    details["paused_because"] = _paused_because(pause, paused_by_irq)
    return RunState.PAUSED, None


def _paused_because(pause: PauseEvent | None, paused_by_irq: bool) -> str:
    if paused_by_irq:
        return "paused by irq"
    if pause is None or pause.failure is None:
        return "paused by an operator"
    # paused from outside irq while backing off: Restate writes the failure on that pause too
    return "paused by an operator while backing off after: " + first_line(
        pause.failure.get("error_message"))
