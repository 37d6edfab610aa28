"""Retry's domain rules, pure: when a run may be retried (and what to do instead when it may
not), and how an adapter's :class:`~console.run_facts.RetryPlan` becomes the
:class:`~console.model.ActionPlan` an operator confirms and the audit keeps.

The gateway refuses with these words; the CLI and the TUI only show them (one rule, one place).
"""

from __future__ import annotations

from console.model import Action, ActionPlan, Run, RunState
from console.run_facts import RetryPlan
from console.semantics import action_conflict, plan

#: what an operator should do instead of retrying a run in each state retry does not fit
_INSTEAD: dict[RunState, str] = {
    RunState.RUNNING: "it is still running: cancel it first (irq cancel {id}; or terminate "
    "where the backend has it), then retry",
    RunState.LATE: "it is still running (heartbeat late): wait, or cancel it first "
    "(irq cancel {id}), then retry",
    RunState.WAITING: "it is waiting for a decision: answer it (irq inbox) or cancel it first "
    "(irq cancel {id}), then retry",
    RunState.BACKING_OFF: "its engine is still retrying it: wait, or cancel it first "
    "(irq cancel {id}), then retry",
    RunState.PAUSING: "it is being paused: resume it instead (irq resume {id}); it continues "
    "from its last journaled step",
    RunState.PAUSED: "it is paused: resume it instead (irq resume {id}); it continues from its "
    "last journaled step",
    RunState.CANCELLING: "its cancel is still being carried out: wait until it is cancelled, "
    "then retry",
    RunState.COMPLETED: "it completed: there is nothing to retry",
}


def retry_refusal(run: Run) -> str | None:
    """Why ``run`` cannot be retried now, naming what to do instead; None when it can."""
    if action_conflict(Action.RETRY, run) is None:
        return None
    instead = _INSTEAD.get(run.state, "retry applies only to failed, given_up, cancelled, "
                           "terminated and lost runs")
    return f"{run.id} is {run.state.value}: {instead.format(id=run.id)}"


def retry_action_plan(run: Run, retry: RetryPlan) -> ActionPlan:
    """The plan a retry of ``run`` shows and audits: the generic plan (resources, warnings)
    with the backend's answer folded in -- which steps keep their results, which run again,
    and which side effects happen twice."""
    result = plan(Action.RETRY, [run], operations={run.id: list(retry.operations)})
    result.steps_kept = list(retry.steps_kept)
    result.will_rerun = list(retry.will_rerun)
    result.unjournaled_effects = list(retry.unjournaled_effects)
    result.from_step = retry.from_step
    result.new_run = retry.new_run
    # the side effects that happen twice are ``unjournaled_effects`` (the CLI and the TUI
    # show them as their own lines, in red); a warning repeating them said it all twice
    if retry.new_run:
        result.warnings.append(
            f"{run.id}'s failed execution stays in its history; the retry starts a new "
            "execution that reuses the kept steps' results"
        )
    if not retry.any_step:
        result.warnings.append(
            f"{run.backend} restarts only from the last good step, not from a chosen one"
        )
    result.warnings.extend(retry.warnings)
    return result
