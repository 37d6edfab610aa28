"""Why a Restate invocation failed, was given up or is being retried, read from its
``sys_invocation`` row, its journal and its ``sys_journal_events`` (pure functions).

Measured on restate-server 1.7.12 / restate-sdk 1.3.0:

- A retry policy with ``on_max_attempts="pause"`` that runs out leaves the invocation
  ``paused`` with ``retry_count``, ``last_failure`` and ``next_retry_at`` NULL and a
  ``Paused`` journal event whose ``last_failure`` holds the error (``error_code``,
  ``error_message``, ``restate_doc_error_code``, ``related_command_name``).
- A manual ``PATCH /invocations/ID/pause`` of a backing-off invocation writes the very same
  ``Paused`` event (with the last failure), but leaves the stale ``retry_count`` and
  ``next_retry_at`` in the row; a manual pause of a running one writes no ``last_failure``.
  irq records its own pauses in the pause ledger, so a pause irq made is never "given up".
- A ``ctx.run`` that exhausts its own ``RunOptions(max_attempts=…)`` journals a failed
  ``Notification: Run`` and the invocation completes with ``completion_failure``
  ``"[500] RuntimeError('…')"``.
- While backing off, ``retry_count`` is the attempt that failed (1 = the first try) and
  ``last_failure_related_command_name`` the ``ctx.run`` that failed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend_adapters.restate.journal_view import JournalView
from backend_adapters.restate.row_values import parse_time
from console.run_facts import RunError, StepRetry

#: ``[500] RuntimeError('carrier down')`` -> code, text
_COMPLETION_FAILURE = re.compile(r"^\[(\d+)(?: [^\]]*)?\]\s*(.*)$", re.DOTALL)
#: the Python SDK's ``repr`` of an exception: ``RuntimeError('carrier down')``
_EXCEPTION_REPR = re.compile(r"^([A-Za-z_][\w.]*)\((['\"])(.*)\2\)$", re.DOTALL)


@dataclass(frozen=True)
class PauseEvent:
    """The newest ``Paused`` event of an invocation."""

    at: datetime | None
    failure: dict[str, Any] | None  # the ``last_failure`` it carries (None: a manual pause)

    @property
    def reason(self) -> str:
        if self.failure is None:
            return "paused by an operator"
        return f"retries exhausted: {first_line(self.failure.get('error_message'))}"


def pause_event(row: dict[str, Any]) -> PauseEvent:
    """A ``sys_journal_events`` row of type ``Paused``."""
    try:
        event = json.loads(str(row.get("event_json") or "{}"))
    except ValueError:
        event = {}
    failure = event.get("last_failure") if isinstance(event, dict) else None
    if isinstance(failure, str):
        failure = {"error_message": failure}
    return PauseEvent(
        at=parse_time(row.get("appended_at")),
        failure=failure if isinstance(failure, dict) else None,
    )


def given_up(row: dict[str, Any], event: PauseEvent | None, *, paused_by_irq: bool) -> bool:
    """Restate paused the invocation because its retry policy ran out (not an operator)."""
    if row.get("status") != "paused" or paused_by_irq or event is None:
        return False
    # a manual pause of a backing-off invocation carries the failure too, but keeps the
    # stale retry_count; Restate's own pause after the last attempt clears it
    return event.failure is not None and row.get("retry_count") is None


def first_line(text: object) -> str:
    """A failure message without the handler's traceback (Restate appends it), capped."""
    lines = str(text or "").strip().splitlines()
    return lines[0][:300] if lines else "unknown failure"


def _split_exception(text: str) -> tuple[str | None, str]:
    """``RuntimeError('x')`` -> (``RuntimeError``, ``x``); other text -> (None, text)."""
    found = _EXCEPTION_REPR.match(text.strip())
    if found:
        return found.group(1), found.group(3)
    return None, text.strip()


def _failed_step(journal: JournalView | None) -> tuple[str | None, datetime | None]:
    """The step whose journaled result is a failure, else the one in flight."""
    if journal is None:
        return None, None
    for step in reversed(journal.steps):
        if step.status == "failed":
            return step.name, step.completed_at
    for step in reversed(journal.steps):
        if step.status == "in_flight" and step.index not in journal.waits:
            return step.name, None
    return None, None


def completion_error(row: dict[str, Any], journal: JournalView | None) -> RunError | None:
    """A completed invocation that failed (not cancelled, not killed): its error."""
    failure = str(row.get("completion_failure") or "")
    if row.get("completion_result") != "failure" or not failure:
        return None
    if failure.startswith("[409] cancelled") or failure.startswith("[409] killed"):
        return None
    found = _COMPLETION_FAILURE.match(failure)
    code, text = (found.group(1), found.group(2)) if found else ("", failure)
    kind, message = _split_exception(first_line(text))
    step, step_at = _failed_step(journal)
    return RunError(
        type=kind or (f"error {code}" if code else "error"),
        message=message,
        step=step,
        at=parse_time(row.get("completed_at")) or step_at,
    )


def given_up_error(event: PauseEvent) -> RunError:
    """The error a ``Paused`` event carries (the last attempt's)."""
    failure = event.failure or {}
    kind, message = _split_exception(first_line(failure.get("error_message")))
    code = failure.get("restate_doc_error_code") or failure.get("error_code")
    step = failure.get("related_command_name")
    return RunError(
        type=kind or (f"error {code}" if code else "error"),
        message=message,
        step=str(step) if step else None,
        at=event.at,
    )


def step_retry(row: dict[str, Any], journal: JournalView | None) -> StepRetry | None:
    """A backing-off invocation: the step that failed, the attempt Restate runs next (its
    ``retry_count`` counts the attempts made, 1 = the first try), the last error and when.

    A ``running`` invocation that still carries a failure and a retry count is the next
    attempt in progress: it stays retrying, so an attempt longer than the alert grace does
    not clear the ``retrying`` alert and raise it again (no next attempt time then)."""
    status = row.get("status")
    made = row.get("retry_count")
    if status == "running" and isinstance(made, int) and made >= 1 and row.get("last_failure"):
        step = row.get("last_failure_related_command_name") or (
            journal.in_flight if journal else None)
        return StepRetry(step=str(step or row.get("target") or "invocation"), attempt=made + 1,
                         last_error=first_line(row.get("last_failure")))
    if status != "backing-off":
        return None
    step = row.get("last_failure_related_command_name") or (
        journal.in_flight if journal else None
    )
    return StepRetry(
        step=str(step or row.get("target") or "invocation"),
        attempt=(int(made) + 1) if isinstance(made, int) else 1,
        last_error=first_line(row.get("last_failure")),
        next_attempt_at=parse_time(row.get("next_retry_at")),
    )


def last_step_at(journal: JournalView | None) -> datetime | None:
    """When the newest journaled step result was recorded."""
    if journal is None:
        return None
    done = [s.completed_at for s in journal.steps if s.completed_at is not None
            and s.status != "in_flight"]
    return max(done) if done else None
