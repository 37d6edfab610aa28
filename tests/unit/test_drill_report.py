"""The drill's evaluation: clean recovery, a completed step that ran again, no recovery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.drill_report import FIELDS, Observation, compare_journals, evaluate
from console.model import JournalStep, Resource

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def done(index: int, name: str, start: float, end: float) -> JournalStep:
    return JournalStep(index=index, name=name, status="completed", started_at=at(start),
                       completed_at=at(end))


BEFORE = [
    done(1, "plan", -10, -9),
    done(2, "charge", -9, -8),
    done(3, "work-0", -8, -7),
    JournalStep(index=4, name="work-1", status="in_flight", started_at=at(-1)),
]
HELD = [Resource(id="db-lock", kind="lock", on_pause="release"), Resource(id="gpu-0", kind="gpu")]


def observation(after: list[JournalStep], **changes: object) -> Observation:
    base: dict[str, object] = {
        "run_id": "dbos:drill/wf-1", "backend": "dbos", "preempted_at": T0,
        "journal_before": BEFORE, "resources_before": HELD, "late_at": at(1.5),
        "lost_at": at(5.2), "recovered_at": at(7.0), "recovered_state": "running",
        "journal_after": after, "resources_after": HELD,
    }
    base.update(changes)
    return Observation(**base)  # type: ignore[arg-type]


def test_only_the_in_flight_step_reran_is_clean() -> None:
    after = [*BEFORE[:3], done(4, "work-1", 7.1, 7.4), done(5, "work-2", 7.4, 7.7)]
    result = evaluate(observation(after))
    assert result.clean and result.resources_ok
    assert result.rerun_steps == ["work-1"] and result.completed_steps_rerun == []
    assert (result.late_after_s, result.lost_after_s, result.recovered_after_s) == (1.5, 5.2, 7.0)
    assert set(result.as_json()) == set(FIELDS)
    assert "in-flight step re-ran: work-1" in result.detail


def test_a_completed_step_that_appears_again_is_not_clean() -> None:
    after = [*BEFORE[:3], done(4, "work-1", 7.1, 7.4), done(5, "charge", 7.4, 7.5)]
    result = evaluate(observation(after))
    assert not result.clean
    assert result.completed_steps_rerun == ["charge"]
    assert "completed step(s) ran again: charge" in result.detail


def test_a_completed_step_whose_times_changed_ran_again() -> None:
    after = [BEFORE[0], done(2, "charge", 7.2, 7.3), BEFORE[2], done(4, "work-1", 7.4, 7.6)]
    assert compare_journals(BEFORE, after).completed == ["charge"]
    assert not evaluate(observation(after)).clean


def test_names_repeated_by_design_are_not_reruns() -> None:
    before = [done(1, "wait for decision", -9, -8), done(2, "wait for decision", -7, -6),
              JournalStep(index=3, name="poll", status="in_flight")]
    after = [*before[:2], done(3, "poll", 1, 2), done(4, "wait for decision", 2, 3)]
    assert compare_journals(before, after).completed == []


def test_not_recovered_is_not_clean() -> None:
    result = evaluate(observation([], recovered_at=None, recovered_state=None, timed_out=True))
    assert not result.clean and result.recovered_after_s is None
    assert result.lost_after_s == 5.2
    assert "timed out" in result.detail


def test_a_resource_not_held_again_is_not_clean() -> None:
    after = [*BEFORE[:3], done(4, "work-1", 7.1, 7.4)]
    released = [HELD[0].model_copy(update={"state": "released"}), HELD[1]]
    result = evaluate(observation(after, resources_after=released))
    assert not result.clean and not result.resources_ok
    assert "db-lock not held again after recovery (released)" in result.detail


def test_a_failed_preempt_command_is_not_clean() -> None:
    result = evaluate(observation([], preempt_error="kubectl exited 1: forbidden"))
    assert not result.clean
    assert result.detail == "preempt command failed: kubectl exited 1: forbidden"
