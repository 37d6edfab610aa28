"""Pure functions over the domain model: liveness, action plans, recoverability warnings,
whether an interrupt still takes a decision.

No I/O, no clocks except the ``now`` passed in. Everything the operator is told before an
action ("what is kept, what is released, what may leak") is computed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

# the liveness rules live below the model (its JSON contract uses them); re-exported here
from console.liveness import Liveness as Liveness
from console.liveness import classify_liveness as classify_liveness
from console.liveness import late_margin as late_margin
from console.model import (
    TERMINAL_STATES,
    Action,
    ActionPlan,
    Interrupt,
    PlannedResource,
    Run,
    RunState,
)
from console.run_record import RunFacts

#: states in which the agent is executing (or should be) and heartbeats are expected
LIVE_STATES = frozenset({RunState.RUNNING, RunState.LATE, RunState.LOST, RunState.WAITING})

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


def unified_state(run: RunFacts, now: datetime) -> RunState:
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
    # the way back for a run that stopped without finishing its work (DESIGN.md §1 "Retry")
    Action.RETRY: frozenset(
        {
            RunState.FAILED,
            RunState.GIVEN_UP,
            RunState.CANCELLED,
            RunState.TERMINATED,
            RunState.LOST,
        }
    ),
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


def decision_conflict(interrupt: Interrupt) -> str | None:
    """Why no decision can be delivered to ``interrupt`` now (it was decided or withdrawn:
    a second decision is a conflict), or None while it is pending."""
    if interrupt.status == "pending":
        return None
    return f"{interrupt.id} is {interrupt.status}, not pending"


def _past(action: Action) -> str:
    return {
        Action.PAUSE: "paused",
        Action.RESUME: "resumed",
        Action.CANCEL: "cancelled",
        Action.TERMINATE: "terminated",
        Action.RETRY: "retried",
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
        result.warnings.extend(_recoverability_for(action, run))
        # what the action does on this backend (e.g. Temporal's attempts), from the adapter
        result.warnings.extend(f"{run.id}: {n}" for n in run.action_notes.get(action, []))
        if action in (Action.PAUSE, Action.RESUME) and run.in_flight_step:
            result.will_rerun.append(f"{run.id}: {run.in_flight_step}")
    return result


def _plan_resources(action: Action, run: Run, out: ActionPlan) -> None:
    for res in run.resources:
        if res.state == "released":
            continue
        item = PlannedResource(run_id=run.id, id=res.id, kind=res.kind)
        if action is Action.PAUSE:
            # a snapshot resource's state is saved and restored: kept, as far as the run goes
            kept = res.on_pause in ("keep", "snapshot")
            (out.resources_kept if kept else out.resources_released).append(item)
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
    if (
        action in (Action.PAUSE, Action.CANCEL)
        and run.heartbeat_timeout_s is None
        and run.heartbeat_expected
    ):
        warnings.append(
            f"{run.id}: no heartbeat timeout: the agent notices {action.value} only at its "
            "next step"
        )
    return warnings


# --------------------------------------------------------------------- recoverability

#: checkpointer names that keep a run's state in the worker's memory (LangGraph's savers too)
IN_MEMORY_CHECKPOINTERS = frozenset(
    {"memory", "in_memory", "inmemory", "inmem", "MemorySaver", "InMemorySaver"}
)


def in_memory(run: RunFacts) -> bool:
    return run.checkpointer is not None and run.checkpointer in IN_MEMORY_CHECKPOINTERS


def recoverability_warnings(run: RunFacts) -> list[str]:
    """Why ``run`` cannot be safely preempted or recovered, in operator words (empty if it can).

    Backend-neutral: adapters put the facts in the typed fields of :class:`Run`
    (``heartbeat_timeout_s``, ``step_timeout_s``, ``abort_timeout_s``, ``checkpointer``,
    ``app_version``/``version_pinned``, ``attempt``); the gateway's hub adds these words to
    every run of every backend. Facts an adapter does not know (None) warn about nothing.
    """
    out: list[str] = []
    if run.state in TERMINAL_STATES:
        return out
    hb_timeout, step = run.heartbeat_timeout_s, run.step_timeout_s
    if hb_timeout is None and run.heartbeat_expected:
        noticed = (
            f"at the step's own timeout ({step:g}s)" if step else "by silence only (no deadline)"
        )
        out.append(f"no heartbeat timeout: a dead worker is noticed {noticed}")
    elif hb_timeout is not None and step is not None and hb_timeout >= step:
        out.append(
            f"heartbeat timeout {hb_timeout:g}s is not shorter than the step it guards "
            f"({step:g}s): the step's own timeout fires first, so heartbeats never catch a "
            "dead worker"
        )
    if step is not None and run.abort_timeout_s is not None and step > run.abort_timeout_s:
        out.append(
            f"the step may run {step:g}s, longer than the backend's abort timeout "
            f"{run.abort_timeout_s:g}s: a step that long is aborted on every attempt"
        )
    if in_memory(run):
        out.append(
            f"in-memory checkpointer ({run.checkpointer}): the run's state is lost if its "
            "worker dies; nothing can recover it"
        )
    if run.version_pinned is False:
        version = f" ({run.app_version})" if run.app_version else ""
        out.append(
            f"application version not pinned{version}: after a code change this run may be "
            "recovered by no worker, or replayed on code it was not written for"
        )
    if run.attempt is not None and run.attempt >= 2:
        out.append(
            f"on attempt {run.attempt}: it failed or was interrupted {run.attempt - 1} "
            "time(s) before; its in-flight step has already run (at-least-once)"
        )
    return out


def _recoverability_for(action: Action, run: Run) -> list[str]:
    """The recoverability facts that change what ``action`` does to ``run``."""
    out: list[str] = []
    if action in (Action.PAUSE, Action.RESUME):
        if in_memory(run):
            out.append(
                f"{run.id}: state is in the worker's memory ({run.checkpointer}): if the "
                "worker restarts while paused, resume cannot continue the run"
            )
        if run.version_pinned is False:
            out.append(
                f"{run.id}: application version not pinned: the run continues on whatever "
                "code the workers have when it resumes; after a code change it may not be "
                "picked up at all"
            )
        step, abort = run.step_timeout_s, run.abort_timeout_s
        if run.in_flight_step and step is not None and abort is not None and step > abort:
            out.append(
                f"{run.id}: the in-flight step re-runs on resume and may run {step:g}s, longer "
                f"than the abort timeout {abort:g}s: it is aborted again"
            )
    if action is Action.RESUME and run.attempt is not None and run.attempt >= 2:
        out.append(
            f"{run.id}: on attempt {run.attempt}: resume re-runs a step that has already "
            "run before"
        )
    return out
