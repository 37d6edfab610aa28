"""Pure mapping from what the Agent Server reports to irq's domain model (no I/O).

A run is a **thread** (its runs are the thread's successive executions). State map
(``docs/backends/langgraph.md`` §2, "Status semantics"):

==========================================  =================================================
thread                                      irq state
==========================================  =================================================
``busy``                                    ``running`` (``cancelling`` once irq asked to
                                            cancel; the gateway refines by heartbeats)
``interrupted`` with interrupts             ``waiting`` (one inbox item per interrupt id)
``interrupted``, no interrupts, no error,   ``waiting``: one inbox item of kind
``next`` set (a static breakpoint)          ``breakpoint`` (``breakpoints.py``)
``interrupted``, no interrupts (a cancel    ``paused`` when irq paused it (``irq_intent`` or
with ``action=interrupt``: UserInterrupt)   the ledger) or it was stopped outside irq (it is
                                            resumable); ``cancelled`` after irq's cancel.
``idle``                                    ``completed`` (``cancelled`` after irq's cancel)
``error``                                   ``failed`` (a resume value that crashed the node:
                                            "poisoned resume", with the recovery)
==========================================  =================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from backend_adapters.langgraph.conventions import (
    BACKEND,
    META_BY,
    META_COMMAND,
    META_DECISION,
    META_INTENT,
    META_INTERRUPT,
)
from backend_adapters.langgraph.interrupt_shapes import interrupt_from_value
from console.model import Action, Interrupt, InterruptKind, JournalStep, Run, RunState
from console.run_facts import RunError

PAUSE_NOTES = [
    "the Agent Server has no pause: irq cancels the run with action=interrupt, which keeps "
    "the thread's checkpoints (resumable)",
    "a synchronous node keeps running after the cancel until it returns (only an async node "
    "stops at its next await); what it writes is discarded",
]
RESUME_NOTES = [
    "continues the thread from its last checkpoint: the node that was in flight when it was "
    "stopped runs again from its start; nodes before it are not re-run",
]
CANCEL_BUSY_NOTES = [
    "cancel with action=interrupt (the checkpoints stay for the audit): a synchronous node "
    "keeps running until it returns; its writes are discarded",
]
CANCEL_BREAKPOINT_NOTES = [
    "the thread stays stopped at its breakpoint on the server (nothing runs); irq records it "
    "as cancelled, which is terminal for irq",
]
CANCEL_WAITING_NOTES = [
    "the pending interrupt is resolved without a decision (state updated as __end__, "
    "Agent Inbox's 'mark as resolved'): the graph never receives an answer",
]


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def metadata_of(thread: Mapping[str, Any]) -> dict[str, Any]:
    meta = thread.get("metadata")
    return meta if isinstance(meta, dict) else {}


def intent_of(thread: Mapping[str, Any]) -> dict[str, Any]:
    intent = metadata_of(thread).get(META_INTENT)
    return intent if isinstance(intent, dict) else {}


def error_name(thread: Mapping[str, Any]) -> str:
    """The exception name of the thread's error ("" when none or unknown)."""
    error = thread.get("error")
    if isinstance(error, dict):
        return str(error.get("error") or error.get("type") or "")
    if isinstance(error, str):
        return error.split(":", 1)[0].strip()
    return ""


def pending_interrupts(thread: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(task id, ``{id, value}``) of every pending interrupt: ``thread.interrupts`` is keyed by
    task id, each a list. Empty unless the thread is ``interrupted``."""
    if thread.get("status") != "interrupted":
        return []
    raw = thread.get("interrupts")
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(raw, dict):
        for task_id, items in raw.items():
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    out.append((str(task_id), item))
    return out


def may_be_at_breakpoint(thread: Mapping[str, Any]) -> bool:
    """``interrupted``, no interrupt value, no error, not cancelled by irq: stopped at a
    static breakpoint if its state has ``next`` nodes (read the state to know)."""
    return (
        thread.get("status") == "interrupted"
        and not pending_interrupts(thread)
        and not error_name(thread)
        and intent_of(thread).get("action") != "cancel"
    )


def state_of(thread: Mapping[str, Any], *, ledger_paused: bool) -> RunState:
    status = str(thread.get("status") or "")
    intent = intent_of(thread).get("action")
    if status == "busy":
        return RunState.CANCELLING if intent == "cancel" else RunState.RUNNING
    if status == "interrupted":
        if intent == "cancel":
            return RunState.CANCELLED
        if pending_interrupts(thread):
            return RunState.WAITING
        return RunState.PAUSED  # stopped by irq's pause, or by a cancel outside irq
    if status == "error":
        return RunState.FAILED
    if intent == "cancel":
        return RunState.CANCELLED
    return RunState.COMPLETED


def interrupts_of(
    thread: Mapping[str, Any], *, run_id: str, node_of: Mapping[str, str] | None = None
) -> list[Interrupt]:
    """The thread's pending interrupts as irq interrupts; none once irq cancelled it."""
    if intent_of(thread).get("action") == "cancel":
        return []
    created = (
        parse_time(thread.get("state_updated_at"))
        or parse_time(thread.get("updated_at"))
        or datetime.now(UTC)
    )
    return [
        interrupt_from_value(
            item.get("value"),
            run_id=run_id,
            native_id=item["id"],
            created_at=created,
            node=(node_of or {}).get(task_id, ""),
        )
        for task_id, item in pending_interrupts(thread)
    ]


def run_from_thread(
    thread: Mapping[str, Any],
    *,
    context: str,
    ledger_paused: bool = False,
    checkpointer: str | None = None,
    interrupts: Iterable[Interrupt] = (),
    last_run: Mapping[str, Any] | None = None,
    failure: RunError | None = None,
) -> Run:
    """One thread (as ``/threads/search`` selects it, or ``GET /threads/{tid}``) as a Run.

    ``last_run``: the thread's latest Agent Server run, read for failed threads only (a
    poisoned resume is recognised by irq's metadata on it). ``failure``: a failed thread's
    failure (the node that raised, ``retry.failure_of``); without it, the thread's own error.
    ``last_step_at`` is ``state_updated_at``: the newest checkpoint's time once the thread
    stopped (a busy thread's stays at its run's start: ``get_run`` reads its state)."""
    tid = str(thread["thread_id"])
    meta = metadata_of(thread)
    status = str(thread.get("status") or "")
    interrupts = list(interrupts)
    state = state_of(thread, ledger_paused=ledger_paused)
    at_breakpoint = any(i.kind is InterruptKind.BREAKPOINT for i in interrupts)
    if state is RunState.PAUSED and at_breakpoint:
        state = RunState.WAITING  # a static breakpoint waits for a person, like interrupt()
    error = error_name(thread)
    intent = intent_of(thread)
    warnings: list[str] = []
    notes: dict[Action, list[str]] = {}
    if state in (RunState.RUNNING, RunState.WAITING, RunState.PAUSED):
        notes[Action.CANCEL] = list(
            CANCEL_BREAKPOINT_NOTES
            if at_breakpoint
            else CANCEL_WAITING_NOTES
            if state is RunState.WAITING
            else CANCEL_BUSY_NOTES
        )
    if state is RunState.RUNNING:
        notes[Action.PAUSE] = list(PAUSE_NOTES)
    if state is RunState.PAUSED:
        notes[Action.RESUME] = list(RESUME_NOTES)
        if intent.get("action") != "pause" and not ledger_paused:
            warnings.append(
                f"stopped outside irq (thread interrupted, {error or 'no interrupt pending'}): "
                "resumable; resume continues from the last checkpoint"
            )
    if state is RunState.FAILED:
        warnings.extend(_failure_warnings(tid, thread, last_run))
        if failure is None:
            raw = thread.get("error")
            failure = RunError(
                type=error_name(thread) or "error",
                message=str(raw.get("message") or "") if isinstance(raw, dict) else str(raw or ""),
                at=parse_time(thread.get("updated_at")),
            )
        notes[Action.RETRY] = [
            f"forks the thread from the checkpoint before {failure.step or 'the failed node'}: "
            "nodes before it keep their results; it and every node after it run again, with "
            "their side effects (LangGraph does not journal them)"
        ]
    details: dict[str, Any] = {
        "graph_id": meta.get("graph_id"),
        "assistant_id": meta.get("assistant_id"),
        "thread_status": status,
    }
    if error:
        details["error"] = error
    if intent:
        details["intent"] = intent
    native = status + (f"/{error}" if error and status != "busy" else "")
    started = parse_time(thread.get("created_at"))
    return Run(
        id=Run.make_id(BACKEND, context, tid),
        backend=BACKEND,
        context=context,
        native_id=tid,
        name=str(meta.get("graph_id") or meta.get("assistant_id") or ""),
        state=state,
        native_state=native,
        interrupts=[i.id for i in interrupts],
        warnings=warnings,
        started_at=started,
        updated_at=parse_time(thread.get("updated_at")) or datetime.now(UTC),
        # only a busy thread runs code that could heartbeat; the server keeps no run heartbeat
        heartbeat_expected=status == "busy",
        checkpointer=checkpointer,
        action_notes=notes,
        error=failure if state is RunState.FAILED else None,
        last_step_at=parse_time(thread.get("state_updated_at")) or started,
        details=details,
    )


def _failure_warnings(
    tid: str, thread: Mapping[str, Any], last_run: Mapping[str, Any] | None
) -> list[str]:
    meta = last_run.get("metadata") if isinstance(last_run, Mapping) else None
    if not isinstance(meta, dict) or not meta.get(META_COMMAND):
        return []
    error = error_name(thread) or "an exception"
    return [
        f"poisoned resume: the {meta.get(META_DECISION) or 'decision'} irq sent "
        f"(by {meta.get(META_BY) or '?'}) crashed the node with {error}; LangGraph keeps that "
        "resume value and replays it on every later resume. Recovery: clear it with "
        f"POST /threads/{tid}/state {{\"values\": null}} and decide again, fork from the "
        "parent checkpoint, or mark it resolved (as_node=__end__)"
    ]


# ------------------------------------------------------------------------------- journal


def _result_summary(result: Any) -> str:
    if isinstance(result, dict) and result:
        return "wrote " + ", ".join(sorted(str(k) for k in result))[:300]
    return ""


def decisions_from_runs(runs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """interrupt id -> "approve by alice": the decisions irq sent, from its run metadata."""
    out: dict[str, str] = {}
    for run in runs:
        meta = run.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get(META_INTERRUPT), str):
            out[meta[META_INTERRUPT]] = f"{meta.get(META_DECISION)} by {meta.get(META_BY) or '?'}"
    return out


def journal_from_history(
    history: Iterable[Mapping[str, Any]],
    *,
    thread: Mapping[str, Any],
    decided: Mapping[str, str] | None = None,
) -> list[JournalStep]:
    """The thread's checkpoint history (newest first, as the server answers) as journal steps:
    one per node that ran from each checkpoint, with what it wrote, which failed, and which
    are pending (in flight, or waiting for a decision). ``decided``: what irq sent for which
    interrupt (:func:`decisions_from_runs`)."""
    snapshots = sorted(
        (h for h in history if isinstance(h, Mapping)),
        key=lambda h: (_step(h), str(h.get("created_at") or "")),
    )
    status = str(thread.get("status") or "")
    state = state_of(thread, ledger_paused=False)
    if state is RunState.PAUSED and may_be_at_breakpoint(thread):
        state = RunState.WAITING  # its latest snapshot's tasks wait for the breakpoint
    pending_ids = {item["id"] for _task, item in pending_interrupts(thread)}
    out: list[JournalStep] = []
    for n, snap in enumerate(snapshots):
        latest = n == len(snapshots) - 1
        started = parse_time(snap.get("created_at"))
        ended = parse_time(snapshots[n + 1].get("created_at")) if not latest else None
        raw_tasks = snap.get("tasks")
        tasks = raw_tasks if isinstance(raw_tasks, list) else []
        for task in tasks:
            if not isinstance(task, dict) or str(task.get("name", "")).startswith("__"):
                continue
            name = str(task.get("name") or "?")
            status_, detail = _task_status(
                task, latest, status, state, pending_ids, decided or {}
            )
            out.append(
                JournalStep(
                    index=_step(snap),
                    name=name,
                    status=status_,
                    started_at=started,
                    completed_at=ended if status_ == "completed" else None,
                    detail=detail,
                )
            )
    return out


def _step(snap: Mapping[str, Any]) -> int:
    meta = snap.get("metadata")
    step = meta.get("step") if isinstance(meta, dict) else None
    return step if isinstance(step, int) else 0


def _task_status(
    task: Mapping[str, Any],
    latest: bool,
    thread_status: str,
    state: RunState,
    pending_ids: set[str],
    decided: Mapping[str, str],
) -> tuple[Literal["completed", "in_flight", "failed"], str]:
    if task.get("error"):
        return "failed", f"error: {task['error']}"[:500]
    asked = [i.get("id") for i in task.get("interrupts") or [] if isinstance(i, dict)]
    if asked and any(i in pending_ids for i in asked):
        return "in_flight", f"waiting for a decision (interrupt {', '.join(map(str, asked))})"
    if asked:
        answers = [decided[i] for i in asked if isinstance(i, str) and i in decided]
        by = f"; received {', '.join(answers)} via irq" if answers else ""
        return "completed", f"asked for a decision{by}"
    if not latest or task.get("result") is not None:
        return "completed", _result_summary(task.get("result"))
    if thread_status == "busy":
        return "in_flight", "running (re-runs from its start if the run is stopped)"
    if state is RunState.PAUSED:
        return "in_flight", "stopped by the pause: runs again from its start on resume"
    if state is RunState.WAITING and thread_status == "interrupted":
        return "in_flight", "not started: the thread waits at a static breakpoint for a decision"
    if state is RunState.CANCELLED:
        return "in_flight", "stopped by the cancel: its writes were discarded"
    return "in_flight", "pending"
