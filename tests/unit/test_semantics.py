from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from console.model import Action, Resource, Run, RunState
from console.semantics import (
    action_conflict,
    beat_is_stale,
    classify_liveness,
    plan,
    recoverability_warnings,
    unified_state,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _run(**kw) -> Run:
    base = dict(id="dbos:local/wf", backend="dbos", context="local", native_id="wf")
    base.update(kw)
    return Run(**base)


def _ago(s: float) -> datetime:
    return NOW - timedelta(seconds=s)


def test_a_beat_is_stale_only_when_both_its_seq_and_its_time_are_older():
    assert beat_is_stale(10, _ago(1), 11, NOW)
    assert beat_is_stale(10, NOW, 11, NOW)  # same instant, lower seq: the later push lost
    assert not beat_is_stale(12, _ago(1), 11, NOW)  # a higher seq always counts
    assert not beat_is_stale(11, NOW, 11, NOW)
    assert not beat_is_stale(1, NOW, 11, _ago(1))  # a restarted counter, later: heard
    assert not beat_is_stale(1, None, 11, NOW)  # no time given: never dropped on seq alone
    assert not beat_is_stale(1, NOW, None, None)  # the first beat of a run
    assert not beat_is_stale(1, NOW.replace(tzinfo=None), 11, NOW)  # naive vs aware


def test_liveness_moves_running_late_lost_with_heartbeat_age():
    kw = dict(interval_s=2.0, timeout_s=10.0)
    assert classify_liveness(_ago(1), NOW, **kw) == "running"
    assert classify_liveness(_ago(2.9), NOW, **kw) == "running"  # cadence + 1 s margin
    assert classify_liveness(_ago(3.5), NOW, **kw) == "late"
    assert classify_liveness(_ago(10.5), NOW, **kw) == "lost"


def test_liveness_without_timeout_is_lost_after_five_cadences():
    assert classify_liveness(_ago(9), NOW, interval_s=2.0, timeout_s=None) == "late"
    assert classify_liveness(_ago(11), NOW, interval_s=2.0, timeout_s=None) == "lost"


def test_liveness_is_unknown_without_cadence_or_sample():
    assert classify_liveness(None, NOW, interval_s=2.0, timeout_s=10) == "unknown"
    assert classify_liveness(_ago(100), NOW, interval_s=None, timeout_s=10) == "unknown"


@given(
    age=st.floats(min_value=0, max_value=1e5),
    interval=st.floats(min_value=0.1, max_value=600),
    extra=st.floats(min_value=0, max_value=1e4),
)
def test_liveness_never_goes_back_as_silence_grows(age, interval, extra):
    order = {"running": 0, "late": 1, "lost": 2}
    timeout = interval * 3
    a = classify_liveness(_ago(age), NOW, interval_s=interval, timeout_s=timeout)
    b = classify_liveness(_ago(age + extra), NOW, interval_s=interval, timeout_s=timeout)
    assert order[a] <= order[b]


def test_unified_state_waiting_when_interrupt_pending_and_beating():
    run = _run(heartbeat_at=_ago(1), heartbeat_interval_s=2, heartbeat_timeout_s=10,
               interrupts=["dbos:local/wf#wf/1"])
    assert unified_state(run, NOW) is RunState.WAITING


def test_unified_state_silence_beats_waiting():
    run = _run(heartbeat_at=_ago(30), heartbeat_interval_s=2, heartbeat_timeout_s=10,
               interrupts=["x"])
    assert unified_state(run, NOW) is RunState.LOST


def test_unified_state_keeps_paused_and_terminal_states():
    for state in (RunState.PAUSED, RunState.COMPLETED, RunState.CANCELLED):
        run = _run(state=state, heartbeat_at=_ago(999), heartbeat_interval_s=2)
        assert unified_state(run, NOW) is state


GPU = Resource(id="gpu-0", kind="gpu", on_pause="keep", on_cancel="release")
LOCK = Resource(id="orders-lock", kind="lock", on_pause="release", on_cancel="release")
VOL = Resource(id="scratch", kind="volume", on_pause="keep", on_cancel="keep")


def test_pause_plan_keeps_gpu_and_releases_lock():
    p = plan(Action.PAUSE, [_run(resources=[GPU, LOCK], heartbeat_timeout_s=10)],
             operations={"dbos:local/wf": ["cancel_workflow"]})
    assert [r.id for r in p.resources_kept] == ["gpu-0"]
    assert [r.id for r in p.resources_released] == ["orders-lock"]
    assert p.operations == ["cancel_workflow"]
    assert p.resources_at_risk == []


def test_cancel_plan_releases_all_but_on_cancel_keep():
    p = plan(Action.CANCEL, [_run(resources=[GPU, LOCK, VOL], heartbeat_timeout_s=10)])
    assert sorted(r.id for r in p.resources_released) == ["gpu-0", "orders-lock"]
    assert [r.id for r in p.resources_kept] == ["scratch"]


def test_terminate_plan_warns_every_held_resource_may_leak():
    p = plan(Action.TERMINATE, [_run(resources=[GPU, LOCK.model_copy(update={"state": "released"})])])
    assert [r.id for r in p.resources_at_risk] == ["gpu-0"]
    assert any("may leak" in w and "gpu-0" in w for w in p.warnings)


def test_plan_on_a_finished_run_says_it_will_not_apply():
    p = plan(Action.PAUSE, [_run(state=RunState.COMPLETED, resources=[GPU])])
    assert p.resources_kept == [] and p.resources_released == []
    assert any("will not apply" in w for w in p.warnings)


def test_pause_plan_names_the_step_that_will_rerun():
    p = plan(Action.PAUSE, [_run(in_flight_step="train-epoch-3", heartbeat_timeout_s=10)])
    assert p.will_rerun == ["dbos:local/wf: train-epoch-3"]


def test_action_conflicts():
    assert action_conflict(Action.RESUME, _run(state=RunState.RUNNING))
    assert action_conflict(Action.RESUME, _run(state=RunState.PAUSED)) is None
    assert action_conflict(Action.CANCEL, _run(state=RunState.COMPLETED))
    assert action_conflict(Action.PAUSE, _run(state=RunState.PAUSED))
    assert action_conflict(Action.TERMINATE, _run(state=RunState.PAUSED)) is None


@given(state=st.sampled_from(list(RunState)), action=st.sampled_from(
    [Action.PAUSE, Action.RESUME, Action.CANCEL, Action.TERMINATE]))
def test_no_action_applies_to_a_terminal_run(state, action):
    conflict = action_conflict(action, _run(state=state))
    if state.terminal:
        assert conflict is not None


def test_recoverability_warnings_name_each_missing_safeguard():
    assert recoverability_warnings(_run()) == [
        "no heartbeat timeout: a dead worker is noticed by silence only (no deadline)"
    ]
    w = recoverability_warnings(_run(step_timeout_s=600))
    assert w == ["no heartbeat timeout: a dead worker is noticed at the step's own timeout (600s)"]
    # nothing runs that could beat (a workflow parked on a signal): no heartbeat warning
    assert recoverability_warnings(_run(heartbeat_expected=False)) == []
    # a heartbeat timeout that is not shorter than the step it guards catches nothing
    w = recoverability_warnings(_run(heartbeat_timeout_s=600, step_timeout_s=30))
    assert len(w) == 1 and "600s is not shorter than the step it guards (30s)" in w[0]
    assert recoverability_warnings(_run(heartbeat_timeout_s=5, step_timeout_s=30)) == []
    # a step longer than the backend's abort timeout never finishes
    w = recoverability_warnings(
        _run(heartbeat_timeout_s=5, step_timeout_s=720, abort_timeout_s=660)
    )
    assert len(w) == 1 and "may run 720s, longer than the backend's abort timeout 660s" in w[0]
    w = recoverability_warnings(_run(heartbeat_timeout_s=5, checkpointer="MemorySaver"))
    assert w == [
        "in-memory checkpointer (MemorySaver): the run's state is lost if its worker dies; "
        "nothing can recover it"
    ]
    assert recoverability_warnings(_run(heartbeat_timeout_s=5, checkpointer="sqlite")) == []
    w = recoverability_warnings(
        _run(heartbeat_timeout_s=5, app_version="243a69f0", version_pinned=False)
    )
    assert len(w) == 1 and w[0].startswith("application version not pinned (243a69f0)")
    assert recoverability_warnings(
        _run(heartbeat_timeout_s=5, app_version="billing-7", version_pinned=True)
    ) == []
    assert recoverability_warnings(_run(heartbeat_timeout_s=5, version_pinned=None)) == []
    w = recoverability_warnings(_run(heartbeat_timeout_s=5, attempt=3))
    assert len(w) == 1 and w[0].startswith("on attempt 3: it failed or was interrupted 2 time")
    assert recoverability_warnings(_run(heartbeat_timeout_s=5, attempt=1)) == []
    # a finished run is past saving
    assert recoverability_warnings(_run(state=RunState.COMPLETED, attempt=5)) == []


def test_plans_carry_the_warnings_that_change_their_outcome():
    run = _run(
        heartbeat_timeout_s=5,
        state=RunState.PAUSED,
        app_version="243a69f0",
        version_pinned=False,
        checkpointer="memory",
        attempt=2,
    )
    resume = plan(Action.RESUME, [run]).warnings
    assert any("not pinned" in w and "resumes" in w for w in resume)
    assert any("worker's memory (memory)" in w for w in resume)
    assert any("on attempt 2: resume re-runs" in w for w in resume)
    # a pinned, durable, first attempt: nothing of that
    safe = run.model_copy(update={"version_pinned": True, "checkpointer": "sqlite",
                                  "attempt": 1})
    assert plan(Action.RESUME, [safe]).warnings == []
    # the step that re-runs on resume is aborted again when it is longer than the abort
    running = _run(heartbeat_timeout_s=5, in_flight_step="train", step_timeout_s=720,
                   abort_timeout_s=660)
    assert any("aborted again" in w for w in plan(Action.PAUSE, [running]).warnings)
    # no heartbeat timeout: pause reaches a running step late; a parked run has no step
    bare = _run()
    assert any("notices pause only at its next step" in w
               for w in plan(Action.PAUSE, [bare]).warnings)
    parked = _run(heartbeat_expected=False)
    assert not any("heartbeat" in w for w in plan(Action.PAUSE, [parked]).warnings)


def test_liveness_of_old_observations_is_judged_when_they_were_read():
    """A budgeted poller read a fresh beat 40 s ago: the run is not late for that reason."""
    run = _run(heartbeat_at=_ago(41), observed_at=_ago(40), heartbeat_interval_s=1,
               heartbeat_timeout_s=5)
    assert unified_state(run, NOW) is RunState.RUNNING
    silent = run.model_copy(update={"heartbeat_at": _ago(47)})
    assert unified_state(silent, NOW) is RunState.LOST


def test_plan_carries_backend_action_notes():
    run = _run(heartbeat_timeout_s=5, action_notes={Action.PAUSE: ["fails attempt 1"]})
    p = plan(Action.PAUSE, [run])
    assert "dbos:local/wf: fails attempt 1" in p.warnings
    assert plan(Action.CANCEL, [run]).warnings == []
    # the notes travel in the JSON contract and come back typed (how clients plan)
    again = Run.model_validate(run.contract(NOW))
    assert again.action_notes == {Action.PAUSE: ["fails attempt 1"]}
    # a key in details is no longer read
    legacy = _run(heartbeat_timeout_s=5, details={"action_notes": {"pause": ["old"]}})
    assert plan(Action.PAUSE, [legacy]).warnings == []


def test_a_running_state_whose_heartbeat_is_now_past_its_timeout_is_suspected_lost():
    """The hello_cancellation case: judged running when read 1.5 s ago (beat 1.0 s old then);
    read now, the beat is 2.5 s old, past the 2 s timeout: running is no longer known."""
    run = _run(state=RunState.RUNNING, heartbeat_at=_ago(2.5), observed_at=_ago(1.5),
               heartbeat_interval_s=1.6, heartbeat_timeout_s=2)
    assert unified_state(run, NOW) is RunState.RUNNING  # as of the observation
    assert run.suspected_state(NOW) is RunState.LOST
    c = run.contract(NOW)
    assert c["state"] == "running" and c["suspected_state"] == "lost"
    assert c["state_as_of"] == _ago(1.5).isoformat() and c["observed_age_s"] == 1.5
    assert c["heartbeat_age_s"] == 2.5
    # past the cadence and its margin, not yet past the timeout: late is suspected
    slow = run.model_copy(update={"heartbeat_at": _ago(4), "heartbeat_timeout_s": 10})
    assert slow.suspected_state(NOW) is RunState.LATE
    # fresh: nothing suspected; a timeout with no cadence still counts
    assert run.model_copy(update={"heartbeat_at": _ago(0.5)}).suspected_state(NOW) is None
    no_cadence = run.model_copy(update={"heartbeat_interval_s": None})
    assert no_cadence.suspected_state(NOW) is RunState.LOST
    # states that claim no liveness are never suspected
    for state in (RunState.PAUSED, RunState.LOST, RunState.COMPLETED, RunState.BACKING_OFF):
        assert run.model_copy(update={"state": state}).suspected_state(NOW) is None
    # a run judged continuously (pushed beats, no observation time) has no as-of
    pushed = _run(heartbeat_at=_ago(1), heartbeat_interval_s=1, heartbeat_timeout_s=5)
    assert pushed.contract(NOW)["state_as_of"] is None
    assert pushed.contract(NOW)["observed_age_s"] is None
