"""Each alert condition source, and the grace window that keeps alerts from flapping (pure
functions over model objects and a fake clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.alert_model import AlertKind, Condition
from console.alert_sources.given_up import given_up
from console.alert_sources.interrupt_overdue import interrupt_overdue
from console.alert_sources.liveness_unknown import liveness_unknown
from console.alert_sources.no_workers import no_workers
from console.alert_sources.obligation_overdue import obligation_overdue
from console.alert_sources.retrying import retrying
from console.alert_sources.stalled import ProgressMarks, stalled
from console.gateway.alert_grace import GraceWindow
from console.gateway.interrupt_deadlines import InterruptDeadlines
from console.model import BackendHealth, Interrupt, Run, RunState
from console.policy.model import Obligation
from console.run_facts import RunError, StepRetry

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _run(native: str, **fields: object) -> Run:
    return Run(id=f"dbos:local/{native}", backend="dbos", context="local", native_id=native,
               name=native, **fields)  # type: ignore[arg-type]


def test_given_up_names_the_engines_error_and_suggests_retry() -> None:
    runs = [_run("a", state=RunState.GIVEN_UP,
                 error=RunError(type="Timeout", message="LLM did not answer", step="call")),
            _run("b", state=RunState.FAILED)]
    [cond] = given_up(runs)
    assert cond.kind is AlertKind.GIVEN_UP and cond.subject == "dbos:local/a"
    assert "LLM did not answer" in cond.detail and "call" in cond.detail
    assert "irq retry dbos:local/a" in cond.action


def test_retrying_starts_at_the_configured_attempt_with_error_and_next_time() -> None:
    nxt = T0 + timedelta(seconds=30)
    runs = [_run("two", state=RunState.BACKING_OFF,
                 retrying=StepRetry(step="fetch", attempt=2, last_error="503")),
            _run("three", state=RunState.BACKING_OFF,
                 retrying=StepRetry(step="fetch", attempt=3, last_error="503",
                                    next_attempt_at=nxt))]
    [cond] = retrying(runs, after=3)
    assert cond.subject == "dbos:local/three" and cond.attempt == 3
    assert "503" in cond.detail and "2026-12-04T12:00:30" in cond.detail
    assert [c.subject for c in retrying(runs, after=2)] == ["dbos:local/two",
                                                            "dbos:local/three"]


def test_no_workers_passes_on_each_contexts_last_reported_conditions() -> None:
    reported = {"temporal:prod": [Condition(kind=AlertKind.NO_WORKERS, subject="queue:q",
                                            detail="no poller on q")],
                "dbos:local": []}
    [cond] = no_workers(reported)
    assert (cond.backend, cond.context) == ("temporal", "prod")


def test_stalled_needs_fresh_beats_and_unmoved_progress_and_spares_slow_progress() -> None:
    marks = ProgressMarks()
    after = 60.0
    for second in range(0, 181, 10):
        now = T0 + timedelta(seconds=second)
        beat = {"heartbeat_at": now, "heartbeat_timeout_s": 30.0}
        runs = [_run("stuck", progress=0.4, **beat),
                _run("slow", progress=0.1 + second / 100_000, **beat),  # tiny, steady moves
                _run("silent", **beat),  # reports no progress: not judged
                _run("late", progress=0.2, state=RunState.LATE, **beat)]
        marks.note(runs, now)
        found = stalled(runs, marks, now, after_s=after)
        if second < after:
            assert found == []
    assert [c.subject for c in found] == ["dbos:local/stuck"]
    assert found[0].since == T0


def test_stalled_is_not_judged_when_beats_are_old() -> None:
    marks = ProgressMarks()
    runs = [_run("old", progress=0.5, heartbeat_at=T0, heartbeat_timeout_s=10.0)]
    marks.note(runs, T0)
    assert stalled(runs, marks, T0 + timedelta(minutes=5), after_s=60) == []


def test_liveness_unknown_after_the_poll_budget_since_the_last_answer() -> None:
    down = BackendHealth(backend="dbos", context="local", reachable=False,
                         last_ok_at=T0, error="connection refused")
    up = BackendHealth(backend="dbos", context="other", reachable=True,
                       last_ok_at=T0 + timedelta(seconds=29))
    budgets = {"dbos:local": 10.0, "dbos:other": 10.0}
    assert liveness_unknown([down, up], budgets, T0, T0 + timedelta(seconds=9)) == []
    [cond] = liveness_unknown([down, up], budgets, T0, T0 + timedelta(seconds=30))
    assert cond.subject == "dbos:local" and "connection refused" in cond.detail
    never = BackendHealth(backend="x", context="y", reachable=False, error="connecting")
    assert liveness_unknown([never], {}, T0, T0 + timedelta(seconds=11))[0].since == T0


def _interrupt(native: str, **fields: object) -> Interrupt:
    return Interrupt(id=f"dbos:local/r#{native}", run_id="dbos:local/r", native_id=native,
                     title="approve", created_at=T0, **fields)  # type: ignore[arg-type]


def test_interrupt_overdue_past_its_deadline_only_while_pending() -> None:
    due = T0 + timedelta(seconds=8)
    pending = _interrupt("a", deadline_at=due)
    decided = _interrupt("b", deadline_at=due, status="decided")
    none = _interrupt("c")
    assert interrupt_overdue([pending, decided, none], due - timedelta(seconds=1)) == []
    [cond] = interrupt_overdue([pending, decided, none], due)
    assert cond.subject == pending.id and cond.since == due and "overdue" in cond.detail


def test_default_deadline_is_given_only_to_interrupts_without_one() -> None:
    deadlines = InterruptDeadlines(8.0)
    given = deadlines.apply(_interrupt("a"))
    assert given.deadline_at == T0 + timedelta(seconds=8)
    own = _interrupt("b", deadline_at=T0 + timedelta(hours=1))
    assert deadlines.apply(own).deadline_at == own.deadline_at
    assert InterruptDeadlines(None).apply(_interrupt("c")).deadline_at is None


def test_obligation_overdue_for_outstanding_obligations_past_due() -> None:
    obs = [Obligation(id="o1", rule="notify", run_id="dbos:local/r", what="tell",
                      created_at=T0, due_at=T0 + timedelta(minutes=1), state="overdue"),
           Obligation(id="o2", rule="notify", run_id="dbos:local/r", what="tell",
                      created_at=T0, due_at=T0 + timedelta(minutes=1), state="fulfilled")]
    [cond] = obligation_overdue(obs, T0 + timedelta(minutes=2))
    assert cond.subject == "o1" and cond.context == "local"


def _cond(subject: str = "dbos:local/a") -> Condition:
    return Condition(kind=AlertKind.STALLED, subject=subject, detail="d")


def test_grace_window_raises_only_after_the_condition_held_for_the_grace_period() -> None:
    window = GraceWindow(5.0)
    cond = _cond()
    assert window.step({cond.key: cond}, set(), T0).raise_now == []
    assert window.step({cond.key: cond}, set(), T0 + timedelta(seconds=4)).raise_now == []
    step = window.step({cond.key: cond}, set(), T0 + timedelta(seconds=5))
    assert step.raise_now == [(cond, T0)]


def test_grace_window_a_blink_shorter_than_grace_raises_nothing_and_clears_nothing() -> None:
    window = GraceWindow(5.0)
    cond = _cond()
    window.step({cond.key: cond}, set(), T0)
    window.step({}, set(), T0 + timedelta(seconds=2))  # gone before its grace ran out
    assert window.step({cond.key: cond}, set(), T0 + timedelta(seconds=6)).raise_now == []
    # raised: a gap shorter than the grace period keeps it open
    open_keys = {cond.key}
    assert window.step({}, open_keys, T0 + timedelta(seconds=10)).clear_now == []
    window.step({cond.key: cond}, open_keys, T0 + timedelta(seconds=12))
    assert window.step({}, open_keys, T0 + timedelta(seconds=13)).clear_now == []
    assert window.step({}, open_keys, T0 + timedelta(seconds=18)).clear_now == [cond.key]


def test_grace_window_trusts_a_sources_since() -> None:
    window = GraceWindow(5.0)
    old = Condition(kind=AlertKind.INTERRUPT_OVERDUE, subject="i", detail="d",
                    since=T0 - timedelta(minutes=1))
    assert window.step({old.key: old}, set(), T0).raise_now == [(old, old.since)]
