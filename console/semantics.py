"""Pure functions over the domain model: liveness, action plans, recoverability warnings.

No I/O, no clocks except the ``now`` passed in. Everything the operator is told before an
action ("what is kept, what is released, what may leak") is computed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from console.model import (
    TERMINAL_STATES,
    Action,
    ActionPlan,
    PlannedResource,
    Run,
    RunState,
    age_seconds,
)

Liveness = Literal["running", "late", "lost", "unknown"]

#: states in which the agent is executing (or should be) and heartbeats are expected
LIVE_STATES = frozenset({RunState.RUNNING, RunState.LATE, RunState.LOST, RunState.WAITING})


def late_margin(interval_s: float) -> float:
    """Slack before a missed beat counts as late: half a cadence, at least one second."""
    return max(1.0, 0.5 * interval_s)


def beat_is_stale(
    seq: int, at: datetime | None, last_seq: int | None, last_at: datetime | None
) -> bool:
    """Is a heartbeat older than the last one accepted for its run?

    An agent can build a beat on one thread while another pushes a newer one (its final
    ``paused`` report): the older beat, arriving second, must not undo the report. Stale
    means a lower ``seq`` *and* an ``at`` that is not later, so an agent that restarts its
    counter in a new execution (a newer ``at``) is still heard, and so is one that sends no
    ``at`` at all.
    """
    if last_seq is None or seq >= last_seq or at is None or last_at is None:
        return False
    if (at.tzinfo is None) != (last_at.tzinfo is None):
        return False  # one naive, one aware: not comparable, so not provably older
    return at <= last_at


def classify_liveness(
    heartbeat_at: datetime | None,
    now: datetime,
    *,
    interval_s: float | None,
    timeout_s: float | None,
    started_at: datetime | None = None,
) -> Liveness:
    """running -> late -> lost from the age of the last heartbeat.

    - ``late`` when the age exceeds the expected cadence plus a margin (suspected),
    - ``lost`` when it exceeds the heartbeat timeout (what the backend itself would decide);
      without a timeout, after five missed cadences.
    A run that never beat is judged from ``started_at`` the same way; with neither, unknown.
    """
    reference = heartbeat_at or started_at
    if reference is None or interval_s is None or interval_s <= 0:
        return "unknown"
    age = age_seconds(reference, now) or 0.0
    lost_after = timeout_s if timeout_s and timeout_s > 0 else 5 * interval_s
    if age > lost_after:
        return "lost"
    if age > interval_s + late_margin(interval_s):
        return "late"
    return "running"


def unified_state(run: Run, now: datetime) -> RunState:
    """The state to show: the adapter's mapped state refined by liveness and interrupts.

    Adapters report ``running`` for anything the backend considers executing; this adds
    ``waiting`` (a pending interrupt), ``late`` and ``lost`` (heartbeat silence).
    Terminal and operator-driven states (paused, pausing, cancelling, backing_off) win.
    """
    base = run.state
    if base not in LIVE_STATES:
        return base
    judged_at = min(now, run.observed_at) if run.observed_at else now
    liveness = classify_liveness(
        run.heartbeat_at,
        judged_at,
        interval_s=run.heartbeat_interval_s,
        timeout_s=run.heartbeat_timeout_s,
        started_at=None,
    )
    if liveness == "lost":
        return RunState.LOST
    if liveness == "late":
        return RunState.LATE
    if run.interrupts:
        return RunState.WAITING
    if base in (RunState.LATE, RunState.LOST) and liveness == "unknown":
        return base
    return RunState.RUNNING


# ------------------------------------------------------------------------- allowed actions

_ALLOWED_FROM: dict[Action, frozenset[RunState]] = {
    Action.PAUSE: frozenset(
        {RunState.RUNNING, RunState.LATE, RunState.WAITING, RunState.BACKING_OFF, RunState.LOST}
    ),
    Action.RESUME: frozenset({RunState.PAUSED, RunState.PAUSING, RunState.LOST}),
    Action.CANCEL: frozenset(
        {s for s in RunState if s not in TERMINAL_STATES and s is not RunState.CANCELLING}
    ),
    Action.TERMINATE: frozenset({s for s in RunState if s not in TERMINAL_STATES}),
}


def action_conflict(action: Action, run: Run) -> str | None:
    """Why ``action`` does not fit ``run``'s state, or None when it does."""
    allowed = _ALLOWED_FROM.get(action)
    if allowed is None or run.state in allowed:
        return None
    if run.state in TERMINAL_STATES:
        return f"{run.id} is {run.state.value}: a finished run cannot be {_past(action)}"
    return f"{run.id} is {run.state.value}: {action.value} applies only to " + ", ".join(
        sorted(s.value for s in allowed)
    )


def _past(action: Action) -> str:
    return {
        Action.PAUSE: "paused",
        Action.RESUME: "resumed",
        Action.CANCEL: "cancelled",
        Action.TERMINATE: "terminated",
    }.get(action, action.value)


# ---------------------------------------------------------------------------- action plans


def plan(
    action: Action,
    runs: Iterable[Run],
    *,
    operations: dict[str, list[str]] | None = None,
    now: datetime | None = None,
) -> ActionPlan:
    """The plan for ``action`` over ``runs``: operations, kept, released, at risk, warnings.

    ``operations`` maps run id -> backend operations (from the adapter's capabilities);
    the plan lists them prefixed with the run id when there are several targets.
    """
    runs = list(runs)
    result = ActionPlan(action=action, targets=[r.id for r in runs])
    many = len(runs) > 1
    for run in runs:
        ops = (operations or {}).get(run.id, [])
        result.operations.extend(f"{run.id}: {op}" if many else op for op in ops)
        conflict = action_conflict(action, run)
        if conflict:
            result.warnings.append(f"will not apply: {conflict}")
            continue
        _plan_resources(action, run, result)
        result.warnings.extend(_action_warnings(action, run))
        notes = run.details.get("action_notes")  # backend-specific, e.g. Temporal attempts
        if isinstance(notes, dict):
            result.warnings.extend(f"{run.id}: {n}" for n in notes.get(action.value, []))
        if action in (Action.PAUSE, Action.RESUME) and run.in_flight_step:
            result.will_rerun.append(f"{run.id}: {run.in_flight_step}")
    return result


def _plan_resources(action: Action, run: Run, out: ActionPlan) -> None:
    for res in run.resources:
        if res.state == "released":
            continue
        item = PlannedResource(run_id=run.id, id=res.id, kind=res.kind)
        if action is Action.PAUSE:
            (out.resources_kept if res.on_pause == "keep" else out.resources_released).append(item)
        elif action is Action.CANCEL:
            (out.resources_kept if res.on_cancel == "keep" else out.resources_released).append(
                item
            )
        elif action is Action.TERMINATE:
            out.resources_at_risk.append(item)
        elif action is Action.RESUME:
            out.resources_kept.append(item)


def _action_warnings(action: Action, run: Run) -> list[str]:
    warnings: list[str] = []
    held = [r for r in run.resources if r.state != "released"]
    if action is Action.TERMINATE and held:
        names = ", ".join(f"{r.kind} {r.id}" for r in held)
        warnings.append(f"{run.id}: terminate skips cleanup; may leak: {names}")
    if action in (Action.PAUSE, Action.CANCEL) and run.state is RunState.LOST:
        warnings.append(
            f"{run.id}: agent is silent (lost); it cannot release resources until it returns"
        )
    if action is Action.PAUSE and run.in_flight_step:
        warnings.append(
            f"{run.id}: in-flight step '{run.in_flight_step}' is at-least-once and runs again "
            "on resume"
        )
    if action is Action.RESUME and run.state is RunState.LOST:
        warnings.append(
            f"{run.id}: resuming a lost run forces a restart; if the agent is in fact alive "
            "its current step runs twice"
        )
    if action in (Action.PAUSE, Action.CANCEL) and run.heartbeat_timeout_s is None:
        warnings.append(
            f"{run.id}: no heartbeat timeout: the agent notices {action.value} only at its "
            "next step"
        )
    return warnings


# --------------------------------------------------------------------- recoverability


def recoverability_warnings(
    run: Run, *, step_seconds: float | None = None, abort_timeout_s: float | None = None
) -> list[str]:
    """Why ``run`` cannot be safely preempted, in operator words (empty when it can)."""
    out: list[str] = []
    if run.state in TERMINAL_STATES:
        return out
    if run.heartbeat_timeout_s is None:
        out.append("no heartbeat timeout: a dead worker is noticed only by silence")
    elif step_seconds is not None and run.heartbeat_timeout_s > step_seconds:
        out.append(
            f"heartbeat timeout {run.heartbeat_timeout_s:g}s is longer than the work it guards "
            f"({step_seconds:g}s)"
        )
    if run.details.get("checkpointer") == "memory":
        out.append("in-memory checkpointer: state is lost if the worker dies")
    if abort_timeout_s is not None and step_seconds is not None and step_seconds > abort_timeout_s:
        out.append(
            f"step runs {step_seconds:g}s, longer than the backend's abort timeout "
            f"{abort_timeout_s:g}s: it is aborted on every attempt"
        )
    return out
