"""The runs the run-walking alert sources look at (console/alert_sources/run_groups.py;
gateway_conditions.py): each source is given the runs it can act on and finds what it found
when given every run; the gateway keeps the groups and the progress marks as its runs change,
and they hold what a walk of every run would find after every kind of change; within one
evaluator tick the groups are read once, outside a tick every call reads them anew."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.alert_sources.given_up import given_up
from console.alert_sources.retrying import retrying
from console.alert_sources.run_groups import group_runs
from console.alert_sources.stalled import ProgressMarks, stalled
from console.gateway.gateway_conditions import GatewayConditions
from console.gateway.hub import Hub, Reporter
from console.gateway.journal_engines import open_journal
from console.gateway.obligation_store import ObligationStore
from console.gateway.protocol import AgentHeartbeat
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
    marks = ProgressMarks()
    marks.note(FLEET, T0)
    assert [c.subject for c in stalled(FLEET, marks, now, after_s=600)] == ["dbos:local/stuck"]


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


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _ids(runs: list[object]) -> list[str]:
    return sorted(r.id for r in runs)  # type: ignore[attr-defined]


def _variant(rng: random.Random, native: str) -> Run:
    """A version of run ``native`` as its adapter may report it: any state, retrying or
    not, holding a resource or not (held or suspected leaked), with or without progress."""
    state = rng.choice([RunState.RUNNING, RunState.RUNNING, RunState.GIVEN_UP,
                        RunState.PAUSED, RunState.COMPLETED, RunState.BACKING_OFF])
    fields: dict[str, object] = {"state": state}
    if rng.random() < 0.3:
        fields["retrying"] = StepRetry(step="fetch", attempt=rng.randint(1, 6), last_error="503")
    if rng.random() < 0.4:
        fields["resources"] = [Resource(id=f"gpu-{native}", kind="gpu",
                                        state=rng.choice(["held", "suspected_leak"]))]
    if rng.random() < 0.7:
        fields["progress"] = rng.choice([0.1, 0.2, 0.3])
    return _run(native, **fields)


def test_the_kept_groups_and_marks_are_what_a_walk_of_every_run_finds() -> None:
    """Adapter reports of every kind, beats that move progress (the fast path changes a run
    in place) or not, runs leaving the index: after each step the groups hold what
    group_runs finds over the index, and the marks what noting every run after every step
    gives (same progress, same since, oldest change first)."""
    rng = random.Random(25)
    clock = Clock()
    hub = Hub(clock=clock)
    live = hub.run_store.groups
    reference = ProgressMarks()
    natives = [f"wf-{i}" for i in range(40)]
    agent = Reporter("agent", "agent")
    seq, shrank = 0, 0
    for step in range(300):
        clock.now = T0 + timedelta(seconds=step)
        roll = rng.random()
        if roll < 0.4:
            hub.observe_runs([_variant(rng, native) for native in rng.sample(natives, 5)])
        elif roll < 0.9:
            for native in rng.sample(natives, 8):
                run_id = f"dbos:local/{native}"
                if run_id not in hub.runs:
                    continue
                seq += 1
                hub.agent_heartbeat(run_id, AgentHeartbeat(
                    type="heartbeat", backend="dbos", context="local", native_id=native, seq=seq,
                    at=clock.now, progress=rng.choice([None, 0.1, 0.2, 0.3]),
                    interval_s=5.0, timeout_s=60.0), agent, 100, clock.now)
            hub.flush_heartbeats()
        else:
            hub.observe_runs([], gone=[f"dbos:local/{rng.choice(natives)}"])
        runs = list(hub.runs.values())
        walked, kept = group_runs(runs), live.groups()
        for name in ("given_up", "retrying", "leak_candidates", "paused"):
            assert _ids(getattr(kept, name)) == _ids(getattr(walked, name)), (step, name)
            # the kept run is the index's current version, not an older copy
            assert all(hub.runs[r.id] is r for r in getattr(kept, name))
        shrank += len(reference.marks) > sum(r.progress is not None for r in runs)
        reference.note(runs, clock.now)
        assert live.progress.marks == reference.marks, step
        since = [mark[1] for mark in live.progress.marks.values()]
        assert since == sorted(since), step  # oldest change first
    # every kind of change was seen: marks kept and forgotten, runs in each group
    assert live.progress.marks and shrank and live.given_up and live.leak_candidates


def test_unmoved_since_reads_the_oldest_marks_however_many_there_are() -> None:
    """The reading in growing slices finds every unmoved run, from none to all of 1,000,
    in the order of their last change."""
    marks = ProgressMarks()
    for i in range(1000):
        marks.mark(f"r{i}", 0.5, T0 + timedelta(seconds=i))
    for i in range(0, 1000, 3):  # these move now: the end, with the newest time
        marks.mark(f"r{i}", 0.6, T0 + timedelta(seconds=2000 + i))
    for cut in (-1, 0, 5, 63, 64, 65, 300, 999, 1500, 2500, 4000):
        moved_after = T0 + timedelta(seconds=cut)
        expected = sorted(((r, m[1]) for r, m in marks.marks.items() if m[1] <= moved_after),
                          key=lambda pair: pair[1])
        assert marks.unmoved_since(moved_after) == expected, cut
    assert len(marks.unmoved_since(T0 + timedelta(seconds=4000))) == 1000
    marks.mark("r1", 0.5, T0 + timedelta(seconds=5000))  # the same progress: no change
    assert marks.marks["r1"] == (0.5, T0 + timedelta(seconds=1))
