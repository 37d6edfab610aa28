"""Retry's pure rules: which states may be retried (and the advice when not), the DBOS plan
from recorded steps (kept / re-run / twice), and the plan as the TUI shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from backend_adapters.base import Conflict, InvalidInput
from backend_adapters.dbos.retry import choose, fork_id
from console.model import Action, Run, RunState
from console.retry_rules import retry_action_plan, retry_refusal
from console.run_facts import RetryPlan
from console.tui.widgets.plan_view import plan_text


def _run(state: RunState) -> Run:
    return Run(id="dbos:local/wf", backend="dbos", context="local", native_id="wf",
               state=state, updated_at=datetime.now(UTC))


@pytest.mark.parametrize(("state", "advice"), [
    (RunState.RUNNING, "cancel it first"),
    (RunState.WAITING, "answer it"),
    (RunState.PAUSED, "resume it instead"),
    (RunState.COMPLETED, "nothing to retry"),
])
def test_a_run_that_cannot_be_retried_names_what_to_do_instead(state: RunState, advice: str):
    refusal = retry_refusal(_run(state))
    assert refusal is not None and advice in refusal


@pytest.mark.parametrize("state", [RunState.FAILED, RunState.GIVEN_UP, RunState.CANCELLED])
def test_failed_given_up_and_cancelled_runs_may_be_retried(state: RunState):
    assert retry_refusal(_run(state)) is None


def _steps(*names: str, failed: str | None = None) -> list[dict[str, Any]]:
    return [{"function_id": i, "function_name": n,
             "error": RuntimeError("x") if n == failed else None}
            for i, n in enumerate(names, start=1)]


def _status(native: str) -> Any:
    return SimpleNamespace(status=native, name="pipeline", app_version="v1",
                           recovery_attempts=101, attributes={})


def test_dbos_retry_keeps_the_steps_before_the_failed_one_and_reruns_it():
    steps = _steps("fetch", "DBOS.setEvent", "transform", "publish", failed="publish")
    choice = choose("wf", _status("ERROR"), steps, None, ledger_paused=False)
    assert choice.start == 4 and not choice.in_place
    assert choice.plan.steps_kept == ["fetch", "transform"]  # bookkeeping rows hidden
    assert choice.plan.will_rerun == ["publish"] and choice.plan.from_step == "publish"
    assert choice.plan.unjournaled_effects[0].startswith("publish (ran before and failed)")
    assert "outside steps" in choice.plan.unjournaled_effects[-1]
    earlier = choose("wf", _status("ERROR"), steps, "1", ledger_paused=False)
    assert earlier.plan.steps_kept == [] and earlier.plan.will_rerun == [
        "fetch", "transform", "publish"]


def test_dbos_retry_of_a_given_up_run_resumes_it_in_place():
    choice = choose("wf", _status("MAX_RECOVERY_ATTEMPTS_EXCEEDED"), _steps("a", "b"), None,
                    ledger_paused=False)
    assert choice.in_place and not choice.plan.new_run and choice.start == 3
    assert "resume_workflow" in choice.plan.operations


def test_dbos_retry_refuses_unknown_steps_and_running_runs():
    with pytest.raises(InvalidInput, match="no step named 'nope'"):
        choose("wf", _status("ERROR"), _steps("a"), "nope", ledger_paused=False)
    with pytest.raises(InvalidInput, match="by its index"):
        choose("wf", _status("ERROR"), _steps("a", "a"), "a", ledger_paused=False)
    with pytest.raises(Conflict, match="cancel it first"):
        choose("wf", _status("PENDING"), _steps("a"), None, ledger_paused=False)
    assert fork_id("wf", "k") == fork_id("wf", "k") != fork_id("wf", "k2")


def test_the_confirmation_shows_kept_steps_rerun_steps_and_side_effects_twice():
    retry = RetryPlan(from_step="publish", steps_kept=["fetch"], will_rerun=["publish"],
                      unjournaled_effects=["publish (ran before and failed)"],
                      operations=["fork_workflow(wf, start_step=2)"], new_run=True)
    plan = retry_action_plan(_run(RunState.FAILED), retry)
    assert plan.action is Action.RETRY and plan.new_run and plan.from_step == "publish"
    assert plan.unjournaled_effects == ["publish (ran before and failed)"]
    assert not any("publish (ran before" in w for w in plan.warnings)  # said once, not twice
    text = plan_text(plan).plain
    assert "step fetch (journaled result reused)" in text
    assert "re-runs   step publish" in text and "twice     publish" in text
