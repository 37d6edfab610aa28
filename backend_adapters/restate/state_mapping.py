"""Restate rows (``sys_invocation``, ``sys_journal``, ``sys_journal_events``) -> irq's Run,
JournalStep and Interrupt. Pure functions; measured behaviour in docs/backends/restate.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from backend_adapters.restate.conventions import (
    BACKEND,
    INTERRUPT_STEP,
    PublishedInterrupt,
    signal_index,
)
from console.model import (
    Action,
    DecisionKind,
    Interrupt,
    InterruptPolicy,
    JournalStep,
    Run,
    RunState,
    utcnow,
)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: object) -> float | None:
    """``"10m"``, ``"1m 30s"``, ``"500ms"``, ``"PT600S"`` -> seconds (None if unreadable)."""
    if not isinstance(text, str) or not text:
        return None
    if text.startswith("PT") and text.endswith("S"):
        try:
            return float(text[2:-1])
        except ValueError:
            return None
    parts = _DURATION.findall(text)
    if not parts:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class JournalView:
    """One invocation's journal, read once: steps, published interrupts, signals seen."""

    steps: list[JournalStep] = field(default_factory=list)
    published: list[PublishedInterrupt] = field(default_factory=list)
    #: signal index -> the value delivered (decoded JSON, or None)
    signals: dict[int, Any] = field(default_factory=dict)

    @property
    def in_flight(self) -> str | None:
        for step in reversed(self.steps):
            if step.status == "in_flight":
                return step.name
        return None

    def pending(self) -> list[PublishedInterrupt]:
        out = []
        for item in self.published:
            index = signal_index(str(item.get("awakeable_id") or ""))
            if index is not None and index not in self.signals:
                out.append(item)
        return out


def _bytes_json(raw: object) -> Any:
    if not isinstance(raw, list):
        return None
    try:
        return json.loads(bytes(int(b) & 0xFF for b in raw).decode())
    except (ValueError, UnicodeDecodeError):
        return None


def read_journal(rows: list[dict[str, Any]]) -> JournalView:
    """Rows of ``sys_journal`` for one invocation (index order): ``Command: Run`` + its
    ``Notification: Run`` (paired by completion id) are one step; ``Command: Sleep`` and
    calls are steps too; ``Notification: Signal`` rows are delivered awakeables."""
    view = JournalView()
    by_completion: dict[int, JournalStep] = {}
    interrupt_completions: set[int] = set()
    for row in sorted(rows, key=lambda r: int(r.get("index") or 0)):
        kind = str(row.get("entry_type") or "")
        at = parse_time(row.get("appended_at"))
        try:
            entry = json.loads(str(row.get("entry_json") or "{}"))
        except ValueError:
            entry = {}
        if kind.startswith("Command: ") and kind not in ("Command: Input", "Command: Output"):
            command: Any = next(iter((entry.get("Command") or {}).values()), {})
            cid = command.get("completion_id") if isinstance(command, dict) else None
            name = str(row.get("name") or "") or kind.removeprefix("Command: ")
            status: Literal["completed", "in_flight", "failed"] = (
                "in_flight" if isinstance(cid, int) else "completed"
            )
            step = JournalStep(
                index=int(row.get("index") or 0),
                name=name,
                status=status,
                started_at=at,
                completed_at=None if status == "in_flight" else at,
                detail=kind.removeprefix("Command: "),
            )
            view.steps.append(step)
            if isinstance(cid, int):
                by_completion[cid] = step
                if name == INTERRUPT_STEP:
                    interrupt_completions.add(cid)
        elif kind.startswith("Notification: "):
            note = (entry.get("Notification") or {}) if isinstance(entry, dict) else {}
            completion = note.get("Completion") if isinstance(note, dict) else None
            signal = note.get("Signal") if isinstance(note, dict) else None
            if isinstance(completion, dict):
                body: Any = next(iter(completion.values()), {})
                body = body if isinstance(body, dict) else {}
                cid = body.get("completion_id")
                result = body.get("result")
                step_or_none = by_completion.get(cid) if isinstance(cid, int) else None
                if step_or_none is not None:
                    step_or_none.status = "completed"
                    step_or_none.completed_at = at
                    if isinstance(result, dict) and "Failure" in result:
                        step_or_none.status = "failed"
                        step_or_none.detail += f": {result['Failure']}"
                    if cid in interrupt_completions and isinstance(result, dict):
                        value = _bytes_json(result.get("Success"))
                        if isinstance(value, dict) and value.get("awakeable_id"):
                            view.published.append(value)  # type: ignore[arg-type]
            elif isinstance(signal, dict):
                ident = signal.get("id") or {}
                index = (ident.get("Index", ident.get("SignalIndex"))
                         if isinstance(ident, dict) else None)
                if isinstance(index, int):
                    result = signal.get("result")
                    value = (
                        _bytes_json(result.get("Success")) if isinstance(result, dict) else None
                    )
                    view.signals[index] = value
    return view


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
}


def run_from_row(
    row: dict[str, Any],
    *,
    context: str,
    journal: JournalView | None,
    pause_reason: str | None,
    service: dict[str, Any] | None,
    pause_requested: bool = False,
) -> tuple[Run, list[Interrupt]]:
    inv = str(row["id"])
    run_id = Run.make_id(BACKEND, context, inv)
    status = str(row.get("status") or "")
    details: dict[str, Any] = {"target": row.get("target"), "restate_status": status}
    warnings: list[str] = []
    interrupts: list[Interrupt] = []
    heartbeat_expected = True
    pending = journal.pending() if journal else []
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
        state = RunState.PAUSED
        heartbeat_expected = False
        if pause_reason:
            details["paused_because"] = pause_reason
            warnings.append(f"paused by Restate: {pause_reason}; resume retries now")
    elif status == "backing-off":
        state = RunState.BACKING_OFF
        heartbeat_expected = False
        details["next_retry_at"] = row.get("next_retry_at")
        details["last_failure"] = row.get("last_failure")
        details["last_failure_code"] = row.get("last_failure_error_code")
        code = f" ({details['last_failure_code']})" if details["last_failure_code"] else ""
        warnings.append(
            f"backing off after attempt {row.get('retry_count') or '?'}: "
            f"{_first_line(row.get('last_failure'))}{code}; next retry at "
            f"{row.get('next_retry_at') or '?'} (resume retries now)"
        )
    elif pause_requested and status == "running":
        # Restate pauses once the ctx.run in flight returns; until then irq says pausing
        state = RunState.PAUSING
    elif pending:
        state = RunState.WAITING
        heartbeat_expected = status == "running"
    else:
        state = RunState.RUNNING
        heartbeat_expected = status == "running"
    if state is RunState.WAITING or (not state.terminal and pending):
        interrupts = [interrupt_of(item, run_id=run_id) for item in pending]
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
        details={k: v for k, v in details.items() if v is not None},
    )
    return run, interrupts


def _first_line(failure: object) -> str:
    """The failure's message without the handler's traceback (Restate appends it), capped:
    a warning is one line in a table and a plan."""
    lines = str(failure or "").strip().splitlines()
    return lines[0][:300] if lines else "unknown failure"
