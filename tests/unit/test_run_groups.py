"""One walk of the index for the run-walking alert sources (console/alert_sources/
run_groups.py; gateway_conditions.py): each source is given the runs it can act on and finds
what it found when given every run; within one evaluator tick the walk is shared, outside a
tick every call walks anew (a source called on its own never sees an old walk)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.alert_sources.given_up import given_up
from console.alert_sources.retrying import retrying
from console.alert_sources.run_groups import group_runs
from console.alert_sources.stalled import ProgressMarks, stalled
from console.gateway.gateway_conditions import GatewayConditions
from console.gateway.hub import Hub
from console.gateway.journal_engines import open_journal
from console.gateway.obligation_store import ObligationStore
from console.leak_conditions import leak_suspected
from console.model import Resource, Run, RunState
from console.run_facts import StepRetry

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _run(native: str, **fields: object) -> Run:
    return Run(id=f"dbos:local/{native}", backend="dbos", context="local", native_id=native,
               name=native, **fields)  # type: ignore[arg-type]


FLEET = [
    _run("silent", progress=0.5, heartbeat_at=T0, heartbeat_timeout_s=10.0),  # old beats
    _run("gave-up", state=RunState.GIVEN_UP),
    _run("retrying", state=RunState.BACKING_OFF,
         retrying=StepRetry(step="fetch", attempt=4, last_error="503")),
    _run("ended-holding", state=RunState.COMPLETED, resources=[Resource(id="gpu-1", kind="gpu")]),
    _run("paused", state=RunState.PAUSED, resources=[Resource(id="gpu-2", kind="gpu")]),
    _run("stuck", progress=0.4, heartbeat_at=T0 + timedelta(minutes=20),
         heartbeat_timeout_s=60.0),
]


def test_each_source_finds_among_its_group_what_it_finds_among_every_run() -> None:
    groups = group_runs(FLEET)
    assert given_up(groups.given_up) == given_up(FLEET) != []
    assert retrying(groups.retrying, after=3) == retrying(FLEET, after=3) != []
    now = T0 + timedelta(minutes=20)
    assert leak_suspected(groups.leak_candidates, now) == leak_suspected(FLEET, now) != []
    assert [r.id for r in groups.paused] == ["dbos:local/paused"]
    assert [r.id for r in groups.leak_candidates] == ["dbos:local/ended-holding"]
    every, grouped = ProgressMarks(), ProgressMarks()
    every.note(FLEET, T0)
    grouped.note_progress(groups.progress, T0)
    assert every.marks == grouped.marks
    assert stalled(FLEET, every, now, after_s=600) == stalled(
        {r.id: r for r in FLEET}, grouped, now, after_s=600)
    assert [c.subject for c in stalled(FLEET, every, now, after_s=600)] == ["dbos:local/stuck"]


def test_the_walk_is_shared_within_a_tick_and_fresh_outside(tmp_path: Path) -> None:
    hub = Hub()
    hub.observe_runs([FLEET[0]])
    journal = open_journal(tmp_path / "journal.db")
    try:
        conditions = GatewayConditions(hub, ObligationStore(journal), {}, {},
                                       retrying_after=3, stalled_after_s=600,
                                       started_at=T0)
        assert list(conditions.given_up()) == []
        hub.observe_runs([FLEET[1]])
        assert len(list(conditions.given_up())) == 1  # outside a tick: walked anew
        with conditions.one_walk():
            assert len(list(conditions.given_up())) == 1
            hub.observe_runs([FLEET[2]])
            assert list(conditions.retrying()) == []  # this tick's walk, taken before
        assert len(list(conditions.retrying())) == 1  # the next walk sees it
    finally:
        journal.close()
