"""A run's beats are bound to the token that first reported it, for the run's lifetime.

Another token of the same scope takes over only when the bound one fell silent past the run's
timeout (its worker died and a sibling resumed the run) or after an operator's resume; a
release check is confirmed only by the token that was bound when it was set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.gateway.agent_beats import MAX_UNKNOWN_RUNS, Reporter
from console.gateway.hub import Hub
from console.gateway.protocol import AgentHeartbeat, FrameError
from console.model import Resource, Run

A = Reporter("token-a", "agent-a")
B = Reporter("token-b", "agent-b")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _beat(native: str, at: datetime, **fields) -> AgentHeartbeat:
    return AgentHeartbeat.model_validate({
        "type": "heartbeat", "backend": "dbos", "context": "local", "native_id": native,
        "seq": int(at.timestamp() * 1000), "at": at, "interval_s": 2.0, "timeout_s": 10.0,
        **fields})


@pytest.fixture
def hub_and_clock() -> tuple[Hub, Clock]:
    clock = Clock()
    hub = Hub(clock=clock)
    hub.observe_runs([Run(id="dbos:local/wf", backend="dbos", context="local", native_id="wf")])
    return hub, clock


def test_another_token_takes_over_only_after_the_bound_one_fell_silent(hub_and_clock):
    hub, clock = hub_and_clock
    hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now, progress=0.2), A)
    clock.now += timedelta(seconds=9)
    with pytest.raises(FrameError) as info:
        hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now, progress=0.9), B)
    assert info.value.code == "bound_to_other"
    clock.now += timedelta(seconds=2)  # 11 s of silence > the beat's timeout_s of 10 s
    hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now, progress=0.9), B)
    assert hub.bound_to("dbos:local/wf") == B
    with pytest.raises(FrameError):  # and now the old token is the other one
        hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now, progress=0.1), A)


def test_an_operator_resume_lets_any_worker_of_the_scope_pick_the_run_up(hub_and_clock):
    hub, clock = hub_and_clock
    hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now), A)
    hub.unbind("dbos:local/wf")
    clock.now += timedelta(seconds=1)
    hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now), B)
    assert hub.bound_to("dbos:local/wf") == B


def test_a_takeover_cannot_confirm_the_release_the_bound_worker_owes(hub_and_clock):
    hub, clock = hub_and_clock
    held = [Resource(id="lock-1", kind="lock", on_pause="release")]
    released = [Resource(id="lock-1", kind="lock", on_pause="release", state="released")]
    hub.agent_heartbeat("dbos:local/wf", _beat("wf", clock.now, resources=held), A)
    hub.expect_release("dbos:local/wf", "pause", {"lock-1"}, 60)
    clock.now += timedelta(seconds=11)
    hub.agent_heartbeat("dbos:local/wf",
                        _beat("wf", clock.now, phase="paused", resources=released), B)
    assert "dbos:local/wf" in hub.release_checks
    assert not [e for e in hub.log if e["kind"] == "notice"]


def test_beats_before_the_adapter_knows_the_run_are_adopted_with_their_binding():
    clock = Clock()
    hub = Hub(clock=clock)
    hub.agent_heartbeat("dbos:local/new", _beat("new", clock.now, progress=0.4), A, 300)
    assert "dbos:local/new" not in hub.runs and len(hub.unknown) == 1
    hub.observe_runs([Run(id="dbos:local/new", backend="dbos", context="local",
                          native_id="new")])
    assert hub.runs["dbos:local/new"].progress == 0.4
    assert hub.bound_to("dbos:local/new") == A
    assert len(hub.unknown) == 0 and hub.unknown.bytes == 0


def test_beats_for_unknown_runs_are_bounded_by_count_and_bytes():
    clock = Clock()
    hub = Hub(clock=clock)
    for i in range(MAX_UNKNOWN_RUNS + 5000):
        hub.agent_heartbeat(f"dbos:local/x{i}", _beat(f"x{i}", clock.now), A, 400)
    assert len(hub.unknown) == MAX_UNKNOWN_RUNS
    assert hub.unknown.evicted == 5000
    assert not hub.history and not hub._beats  # nothing else grows for unknown runs
    assert hub.unknown.get(f"dbos:local/x{MAX_UNKNOWN_RUNS + 4999}") is not None  # newest kept
    assert hub.unknown.get("dbos:local/x0") is None  # oldest evicted
    big = Hub(clock=clock)
    for i in range(100):
        big.agent_heartbeat(f"dbos:local/y{i}", _beat(f"y{i}", clock.now), A,
                            big.unknown.max_bytes // 10)
    assert big.unknown.bytes <= big.unknown.max_bytes and len(big.unknown) == 10
