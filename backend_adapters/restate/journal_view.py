"""One invocation's ``sys_journal`` rows read once: its steps, the interrupts irq's helper
published, the awakeables a ``ctx.run`` handed out, the promises it waits for, the signals
delivered to it (docs/backends/restate.md §2).

Waits are not work: a ``GetPromise`` with no notification yet re-runs nothing on a resume or
a crash (Restate completes it when the promise is resolved), so its step says so and it is
never the step "in flight" that the recoverability warnings speak of.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from backend_adapters.restate.conventions import (
    INTERRUPT_STEP,
    PublishedInterrupt,
    signal_index,
)
from backend_adapters.restate.row_values import bytes_json, bytes_text, parse_time
from console.model import JournalStep

#: an awakeable id as the ingress takes it: ``sign_1`` + base64url of 28 bytes (38 chars)
AWAKEABLE_ID = re.compile(r"sign_1[A-Za-z0-9_-]{38}(?![A-Za-z0-9_-])")


@dataclass(frozen=True)
class HandedOut:
    """An awakeable id found in a journaled ``ctx.run`` result: the run that hands it out."""

    awakeable_id: str
    index: int  # the journal index of the ``Command: Run``
    step: str  # the run's name
    at: datetime | None  # when its result was journaled


@dataclass(frozen=True)
class PromiseWait:
    """A ``Command: GetPromise`` with no notification yet: the handler awaits the promise."""

    key: str
    index: int
    at: datetime | None


@dataclass
class JournalView:
    """One invocation's journal, read once: steps, published interrupts, signals seen."""

    steps: list[JournalStep] = field(default_factory=list)
    published: list[PublishedInterrupt] = field(default_factory=list)
    #: signal index -> the value delivered (decoded JSON, or None)
    signals: dict[int, Any] = field(default_factory=dict)
    #: signal index -> the failure message of a rejected awakeable
    signal_failures: dict[int, str] = field(default_factory=dict)
    #: how many ``Notification: Signal`` entries each signal index has (a second resolve
    #: of an awakeable is appended too: Restate does not deduplicate it)
    signal_counts: dict[int, int] = field(default_factory=dict)
    handed_out: list[HandedOut] = field(default_factory=list)
    promise_waits: list[PromiseWait] = field(default_factory=list)
    #: ``(journal index, wake-up time)`` of each ``Command: Sleep`` not completed yet (the
    #: timeout of a wait begun before it)
    pending_sleeps: list[tuple[int, datetime]] = field(default_factory=list)
    #: journal indexes of the steps that are waits, not work
    waits: set[int] = field(default_factory=set)
    last_at: datetime | None = None  # when the newest entry was appended

    @property
    def in_flight(self) -> str | None:
        for step in reversed(self.steps):
            if step.status == "in_flight" and step.index not in self.waits:
                return step.name
        return None

    def pending(self) -> list[PublishedInterrupt]:
        out = []
        for item in self.published:
            index = signal_index(str(item.get("awakeable_id") or ""))
            if index is not None and index not in self.signals:
                out.append(item)
        return out


@dataclass
class _Reading:
    """What ``read_journal`` keeps between rows: steps by completion id."""

    view: JournalView = field(default_factory=JournalView)
    by_completion: dict[int, JournalStep] = field(default_factory=dict)
    interrupt_completions: set[int] = field(default_factory=set)
    promises: dict[int, PromiseWait] = field(default_factory=dict)
    sleeps: dict[int, tuple[int, datetime]] = field(default_factory=dict)


def read_journal(rows: list[dict[str, Any]]) -> JournalView:
    """Rows of ``sys_journal`` for one invocation (index order): ``Command: Run`` + its
    ``Notification: Run`` (paired by completion id) are one step; ``Command: Sleep``,
    ``GetPromise`` and calls are steps too; ``Notification: Signal`` rows are delivered
    awakeables."""
    reading = _Reading()
    for row in sorted(rows, key=lambda r: int(r.get("index") or 0)):
        kind = str(row.get("entry_type") or "")
        at = parse_time(row.get("appended_at"))
        if at is not None:
            reading.view.last_at = max(at, reading.view.last_at or at)
        try:
            entry = json.loads(str(row.get("entry_json") or "{}"))
        except ValueError:
            entry = {}
        entry = entry if isinstance(entry, dict) else {}
        if kind.startswith("Command: ") and kind not in ("Command: Input", "Command: Output"):
            _command(reading, row, kind, entry, at)
        elif kind.startswith("Notification: "):
            note = entry.get("Notification") or {}
            note = note if isinstance(note, dict) else {}
            if isinstance(note.get("Completion"), dict):
                _completion(reading, note["Completion"], at)
            elif isinstance(note.get("Signal"), dict):
                _signal(reading.view, note["Signal"])
    reading.view.promise_waits = list(reading.promises.values())
    reading.view.pending_sleeps = sorted(reading.sleeps.values())
    return reading.view


def _command(
    reading: _Reading, row: dict[str, Any], kind: str, entry: dict[str, Any],
    at: datetime | None,
) -> None:
    command: Any = next(iter((entry.get("Command") or {}).values()), {})
    command = command if isinstance(command, dict) else {}
    cid = command.get("completion_id")
    index = int(row.get("index") or 0)
    name = str(row.get("name") or "") or kind.removeprefix("Command: ")
    detail = kind.removeprefix("Command: ")
    status: Literal["completed", "in_flight", "failed"] = (
        "in_flight" if isinstance(cid, int) else "completed"
    )
    if kind == "Command: GetPromise":
        key = str(command.get("key") or "")
        name = f"wait for promise '{key}'"
        detail = "GetPromise: waits until the promise is resolved; nothing re-runs"
        reading.view.waits.add(index)
        if isinstance(cid, int):
            reading.promises[cid] = PromiseWait(key=key, index=index, at=at)
    elif kind == "Command: Sleep" and isinstance(cid, int):
        wake = parse_time(command.get("wake_up_time"))
        if wake is not None:
            reading.sleeps[cid] = (index, wake)
    step = JournalStep(
        index=index,
        name=name,
        status=status,
        started_at=at,
        completed_at=None if status == "in_flight" else at,
        detail=detail,
    )
    reading.view.steps.append(step)
    if isinstance(cid, int):
        reading.by_completion[cid] = step
        if name == INTERRUPT_STEP:
            reading.interrupt_completions.add(cid)


def _completion(reading: _Reading, completion: dict[str, Any], at: datetime | None) -> None:
    body: Any = next(iter(completion.values()), {})
    body = body if isinstance(body, dict) else {}
    cid = body.get("completion_id")
    result = body.get("result")
    if not isinstance(cid, int):
        return
    reading.promises.pop(cid, None)
    reading.sleeps.pop(cid, None)
    step = reading.by_completion.get(cid)
    if step is None:
        return
    step.status = "completed"
    step.completed_at = at
    if isinstance(result, dict) and "Failure" in result:
        step.status = "failed"
        step.detail += f": {result['Failure']}"
    if not isinstance(result, dict):
        return
    if cid in reading.interrupt_completions:
        value = bytes_json(result.get("Success"))
        if isinstance(value, dict) and value.get("awakeable_id"):
            reading.view.published.append(value)  # type: ignore[arg-type]
    elif step.detail == "Run":
        text = bytes_text(result.get("Success")) or ""
        for found in dict.fromkeys(AWAKEABLE_ID.findall(text)):
            reading.view.handed_out.append(HandedOut(found, step.index, step.name, at))


def _signal(view: JournalView, signal: dict[str, Any]) -> None:
    ident = signal.get("id") or {}
    index = ident.get("Index", ident.get("SignalIndex")) if isinstance(ident, dict) else None
    if not isinstance(index, int):
        return
    result = signal.get("result")
    view.signal_counts[index] = view.signal_counts.get(index, 0) + 1
    if index in view.signals:
        return  # the first delivery is the one the handler saw
    view.signals[index] = (
        bytes_json(result.get("Success")) if isinstance(result, dict) else None
    )
    failure = result.get("Failure") if isinstance(result, dict) else None
    if isinstance(failure, dict):
        view.signal_failures[index] = str(failure.get("message") or "")
