"""The hub's short paths give what its full merge gives: a run's first beat (and a beat that
announces another cadence), silence turning a run late and lost, an unchanged adapter
report; and the state events they publish still go out (lazily rendered)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console.gateway import run_store as run_store_module
from console.gateway.agent_beats import HISTORY_RUNS
from console.gateway.hub import Hub
from console.gateway.protocol import AgentHeartbeat
from console.model import Resource, Run, RunState

T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _run(i: int = 0, **kw: Any) -> Run:
    return Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local", native_id=f"wf-{i}",
               started_at=T0 - timedelta(minutes=1), updated_at=T0 - timedelta(minutes=1), **kw)


def _beat(i: int = 0, **kw: Any) -> AgentHeartbeat:
    base: dict[str, Any] = dict(type="heartbeat", backend="dbos", context="local",
                                native_id=f"wf-{i}", interval_s=5.0, timeout_s=12.0)
    base.update(kw)
    return AgentHeartbeat(**base)


def _two_hubs(runs: list[Run]) -> tuple[Hub, Hub, Clock]:
    clock = Clock()
    fast, full = Hub(clock=clock), Hub(clock=clock)
    for hub in (fast, full):
        hub.observe_runs([r.model_copy() for r in runs])
    return fast, full, clock


def _full_flush(hub: Hub) -> None:
    """What a flush did before the short paths: the full merge for every dirty run."""
    now = hub.clock()
    for run_id in hub.beats.take_dirty():
        hub.run_store.refresh(run_id, now)


def _state(hub: Hub, run_id: str) -> dict[str, Any]:
    return hub.runs[run_id].fields()


def _last_run_event(hub: Hub) -> dict[str, Any]:
    event = [e for e in hub.log if e["kind"] == "run"][-1]
    data = dict(json.loads(event.full())["data"])
    for moving in ("heartbeat_age_s", "observed_age_s"):  # the age when it is rendered
        data.pop(moving)
    return data


@pytest.mark.parametrize("beat", [
    {"seq": 1, "at": T0, "progress": 0.25},
    {"seq": 1, "at": T0},  # no progress: the adapter's stays
    {"seq": 1, "at": T0, "interval_s": 2.0, "timeout_s": None},
    {"seq": 1},  # no time: the gateway's clock
    {"seq": 1, "at": T0, "in_flight_step": "fetch"},  # another step: the full merge
    {"seq": 1, "at": T0, "resources": [Resource(id="gpu-0", kind="gpu")]},  # ditto
])
def test_a_first_beat_gives_the_run_the_full_merge_gives(beat: dict[str, Any]) -> None:
    fast, full, clock = _two_hubs([_run(progress=0.1)])
    clock.now = T0 + timedelta(seconds=1)
    for hub in (fast, full):
        hub.agent_heartbeat("dbos:local/wf-0", _beat(**beat))
    fast.flush_heartbeats()
    _full_flush(full)
    assert _state(fast, "dbos:local/wf-0") == _state(full, "dbos:local/wf-0")
    assert fast.seq == full.seq  # one run event each
    a, b = _last_run_event(fast), _last_run_event(full)
    assert a == b
    assert a["heartbeat_timeout_s"] == (beat.get("timeout_s", 12.0) or None)


def test_the_first_beat_takes_the_short_path_without_the_full_merge(monkeypatch) -> None:
    hub = Hub(clock=Clock())
    hub.observe_runs([_run(i) for i in range(3)])

    def no_merge(*_a: Any, **_k: Any) -> None:
        raise AssertionError("full merge")

    monkeypatch.setattr(hub.run_store, "_merge", no_merge)
    monkeypatch.setattr(run_store_module, "_differs", no_merge)
    for i in range(3):
        hub.agent_heartbeat(f"dbos:local/wf-{i}", _beat(i, seq=1, at=T0, progress=0.5))
    before = hub.seq
    hub.flush_heartbeats()
    events = [e for e in hub.log if e.seq > before]
    assert len(events) == 3 and all(e["kind"] == "run" for e in events)
    # a first beat changes the cadence and the warnings: compact clients get the full run
    assert all(json.loads(e.compact())["kind"] == "run" for e in events)
    assert all(e["data"]["heartbeat_interval_s"] == 5.0 for e in events)
    # the next beat is a beat: compact clients get a beat event
    hub.clock.now = T0 + timedelta(seconds=5)  # type: ignore[attr-defined]
    hub.agent_heartbeat("dbos:local/wf-0", _beat(0, seq=2, at=hub.clock(), progress=0.6))
    hub.flush_heartbeats()
    assert json.loads(hub.log[-1].compact())["kind"] == "beat"


def test_silence_turns_a_run_late_then_lost_as_the_full_merge_would() -> None:
    fast, full, clock = _two_hubs([_run()])
    for hub in (fast, full):
        hub.agent_heartbeat("dbos:local/wf-0", _beat(seq=1, at=T0))
    fast.flush_heartbeats()
    _full_flush(full)
    seen: list[str] = []
    for seconds in (8, 13):  # late after 5 s + margin, lost after the 12 s timeout
        clock.now = T0 + timedelta(seconds=seconds)
        fast.tick()
        full.run_store.refresh("dbos:local/wf-0", clock.now)
        assert _state(fast, "dbos:local/wf-0") == _state(full, "dbos:local/wf-0")
        event = _last_run_event(fast)
        assert event == _last_run_event(full)
        assert event["updated_at"] == clock.now.isoformat()
        seen.append(event["state"])
    assert seen == [RunState.LATE.value, RunState.LOST.value]


def test_a_late_run_that_beats_again_is_running_and_the_event_is_urgent() -> None:
    hub = Hub(clock=Clock())
    hub.observe_runs([_run()])
    hub.agent_heartbeat("dbos:local/wf-0", _beat(seq=1, at=T0))
    hub.flush_heartbeats()
    hub.clock.now = T0 + timedelta(seconds=8)  # type: ignore[attr-defined]
    hub.tick()
    assert hub.runs["dbos:local/wf-0"].state is RunState.LATE
    woken: list[bool] = []
    from console.gateway.event_log import Subscriber

    sub = Subscriber(wake=lambda: woken.append(True), cursor=hub.seq)
    hub.subscribers.add(sub)
    hub.agent_heartbeat("dbos:local/wf-0", _beat(seq=2, at=hub.clock()))
    hub.flush_heartbeats()
    run = hub.runs["dbos:local/wf-0"]
    assert run.state is RunState.RUNNING and run.updated_at == hub.clock()
    assert sub.urgent and woken
    assert hub.log[-1]["data"]["state"] == "running"


def test_an_unchanged_report_is_skipped_and_a_changed_one_merged() -> None:
    hub = Hub(clock=Clock())
    hub.observe_runs([_run(name="a")])
    seq = hub.seq
    hub.observe_runs([_run(name="a")])
    assert hub.seq == seq
    hub.observe_runs([_run(name="b")])  # a field the merge does not override
    assert hub.seq == seq + 1 and hub.runs["dbos:local/wf-0"].name == "b"
    hub.observe_runs([_run(name="b", progress=0.7)])  # one it does
    assert hub.seq == seq + 2 and hub.runs["dbos:local/wf-0"].progress == 0.7


def test_history_is_kept_for_the_first_runs_and_for_focused_ones() -> None:
    hub = Hub(clock=Clock())
    n = HISTORY_RUNS + 5
    hub.observe_runs([_run(i) for i in range(n)])
    for i in range(n):
        hub.agent_heartbeat(f"dbos:local/wf-{i}", _beat(i, seq=1, at=T0))
    assert len(hub.history) == HISTORY_RUNS
    late = f"dbos:local/wf-{n - 1}"
    assert hub.heartbeat_history(late) == []
    hub.focus([late])
    hub.agent_heartbeat(late, _beat(n - 1, seq=2, at=T0 + timedelta(seconds=1), progress=0.5))
    beats = hub.heartbeat_history(late)
    assert [(b.seq, b.progress) for b in beats] == [(2, 0.5)]
    assert beats[0].contract()["at"] == (T0 + timedelta(seconds=1)).isoformat()


def test_cached_contracts_equal_the_contract_through_beats_and_state_changes() -> None:
    hub = Hub(clock=Clock())
    hub.observe_runs([_run(i) for i in range(3)])
    rid = "dbos:local/wf-0"
    assert set(hub._contracts) == set(hub.runs)  # encoded at the poll that found them

    def check() -> None:
        now = hub.clock()
        for run in hub.runs.values():
            assert json.loads(hub.contract_bytes(run, now)) == run.contract(now)

    check()
    check()  # from the cache
    for seq, seconds in enumerate((1, 2, 3), start=1):  # first beat, then beats in place
        hub.clock.now = T0 + timedelta(seconds=seconds)  # type: ignore[attr-defined]
        hub.agent_heartbeat(rid, _beat(seq=seq, at=hub.clock(), progress=seq / 10))
        hub.flush_heartbeats()
        check()
    hub.clock.now = T0 + timedelta(seconds=20)  # type: ignore[attr-defined]
    hub.tick()  # late, then lost: new run objects
    assert hub.runs[rid].state is RunState.LOST
    check()
    hub.agent_heartbeat(rid, _beat(seq=9, at=hub.clock(), progress=0.9))
    hub.flush_heartbeats()  # running again: the cached rest of the contract still serves
    assert hub.runs[rid].state is RunState.RUNNING and rid in hub._contracts
    check()
    hub.agent_heartbeat(rid, _beat(seq=10, at=hub.clock(), interval_s=1.0))
    hub.flush_heartbeats()  # another cadence: in the part encoded each time
    assert rid in hub._contracts
    check()


def test_a_run_event_rendered_late_shows_the_run_as_of_its_seq() -> None:
    hub = Hub(clock=Clock())
    hub.observe_runs([_run()])
    rid = "dbos:local/wf-0"
    hub.agent_heartbeat(rid, _beat(seq=1, at=T0, progress=0.1))
    hub.flush_heartbeats()
    first = hub.log[-1]  # the first beat: a state event, not rendered yet
    hub.clock.now = T0 + timedelta(seconds=2)  # type: ignore[attr-defined]
    hub.agent_heartbeat(rid, _beat(seq=2, at=hub.clock(), progress=0.2))
    hub.flush_heartbeats()  # the beat path changes the run object in place
    second = hub.log[-1]
    data = json.loads(first.full())["data"]
    assert (data["heartbeat_at"], data["progress"]) == (T0.isoformat(), 0.1)
    assert data["heartbeat_age_s"] == 2.0
    later = json.loads(second.full())["data"]
    assert (later["heartbeat_at"], later["progress"]) == (hub.clock().isoformat(), 0.2)
    assert {k: v for k, v in data.items() if k not in ("heartbeat_at", "progress",
                                                       "heartbeat_age_s")} == \
        {k: v for k, v in later.items() if k not in ("heartbeat_at", "progress",
                                                     "heartbeat_age_s")}


def test_silence_is_judged_within_the_ticks_budget_and_a_beat_read_meanwhile_spares_a_flip(
        ) -> None:
    hub = Hub(clock=Clock())
    hub.observe_runs([_run(i) for i in range(300)])
    for i in range(300):
        hub.agent_heartbeat(f"dbos:local/wf-{i}", _beat(seq=1, at=T0, progress=0.1))
    hub.flush_heartbeats()
    hub.tick_budget_s = 0.0  # an overloaded gateway: the budget is spent at once
    hub.clock.now = T0 + timedelta(seconds=9)  # type: ignore[attr-defined]  # all 300 late
    before = hub.seq
    hub.tick()
    late = [r for r in hub.runs.values() if r.state is RunState.LATE]
    assert len(late) == 63  # judged up to the first look at the budget; 237 wait
    assert hub.liveness_backlog == 237
    waiting = [r.id for r in hub.runs.values() if r.state is RunState.RUNNING]
    hub.agent_heartbeat(waiting[0], _beat(seq=2, at=hub.clock(), progress=0.2))
    hub.flush_heartbeats()  # its beat came before its judgment: it never turns late
    for _ in range(10):
        hub.tick()
    assert hub.liveness_backlog == 0
    assert hub.runs[waiting[0]].state is RunState.RUNNING
    assert sum(r.state is RunState.LATE for r in hub.runs.values()) == 299
    flips = [e for e in hub.log if e.seq > before and e["kind"] == "run"
             and e["data"]["id"] == waiting[0]]
    assert [e["data"]["state"] for e in flips] == ["running"]  # the beat, no late and back
    hub.tick_budget_s = 1.0
    hub.clock.now = T0 + timedelta(seconds=60)  # type: ignore[attr-defined]
    hub.tick()
    assert hub.liveness_backlog == 0
    assert sum(r.state is RunState.LOST for r in hub.runs.values()) == 300
