"""The hand path of a heartbeats frame (console/gateway/plain_beats.py) keeps what the
general path keeps: the same facts, bindings, histories, refusals and run events, beat for
beat, for frames that mix plain beats with every kind of beat the hand path leaves alone.

Two gateways' agent channels (the real AgentChannel, its hub and refusal ledger; no socket)
are fed the same frames; one takes plain beats by hand, the other sends every beat the
general way."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from backend_adapters.heartbeat_push import heartbeat_frame
from console.gateway.agent_beats import HISTORY_RUNS, Reporter
from console.gateway.agent_channel import AgentChannel
from console.gateway.auth import AgentScope, Principal, Role
from console.gateway.hub import Hub
from console.gateway.plain_beats import plain_time
from console.gateway.policy_state import PolicyState
from console.gateway.protocol import AgentHeartbeats, parse_agent_frame
from console.gateway.refusals import RefusalLedger
from console.gateway.settings import GatewaySettings
from console.model import Resource, Run

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Socket:
    """What the channel sends back (error frames)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, frame: str) -> None:
        self.sent.append(orjson.loads(frame))


class GeneralHub(Hub):
    """A hub whose channel sends every beat the general way."""

    takes_plain_beats = False  # type: ignore[assignment]


class Gateway:
    """An agent channel over its own hub, as the server wires them (no socket, no loops)."""

    def __init__(self, runs: int, *, by_hand: bool, clock: Clock) -> None:
        self.hub = Hub(clock=clock) if by_hand else GeneralHub(clock=clock)
        self.hub.observe_runs([Run(id=f"dbos:local/r{i}", backend="dbos", context="local",
                                   native_id=f"r{i}", updated_at=NOW) for i in range(runs)])
        self.audit: list[Any] = []
        self.refusals = RefusalLedger(self.audit.append, interval_s=0.0)
        self.counters: Counter[str] = Counter()
        self.channel = AgentChannel(
            GatewaySettings(port=0, home=Path("/nonexistent")), self.hub,
            {"dbos:local": None, "dbos:other": None},  # type: ignore[dict-item]
            PolicyState(None), None, self.refusals, self.counters)  # type: ignore[arg-type]
        self.ws = Socket()

    def frame(self, beats: list[Any], who: Principal, reporter: Reporter) -> None:
        msg = parse_agent_frame(orjson.dumps({"type": "heartbeats", "id": "f",
                                              "beats": beats}))
        assert isinstance(msg, AgentHeartbeats)
        asyncio.run(self.channel._beats(self.ws, who, reporter, msg, 100 * len(beats)))
        self.hub.flush_heartbeats()
        self.refusals.flush(force=True)

    def state(self) -> dict[str, Any]:
        """Everything a beat may change, in comparable form."""
        beats = self.hub.beats
        return {
            "facts": dict(beats.facts),
            "bound": {k: (v.token_id, v.identity) for k, v in beats.bound.items()},
            "history": {k: list(v) for k, v in beats.history.items()},
            "unknown": [(k, beats.unknown.get(k)) for k in ("dbos:other/r11",)],
            "counts": (beats.beats_accepted, beats.stale_beats, beats.takeovers),
            "runs": {k: r.to_run().model_dump() for k, r in self.hub.runs.items()},
            "events": [e.full() for e in self.hub.log],
            "refused": [(e.target, e.detail) for e in self.audit],
            "errors": self.ws.sent,
            "counters": dict(self.counters),
        }


def _beat(i: int, seq: int, at: datetime, **fields: Any) -> dict[str, Any]:
    return {"backend": "dbos", "context": "local", "native_id": f"r{i}", "seq": seq,
            "at": at.isoformat(), "progress": (i % 10) / 10, "interval_s": 5.0,
            "timeout_s": 30.0, **fields}


AGENT = Principal("agent-a", Role.AGENT, None, "tok-a")
OTHER = Principal("agent-b", Role.AGENT, None, "tok-b")
SCOPED = Principal("agent-s", Role.AGENT, (AgentScope.parse("dbos:local/r1"),), "tok-s")


def _mixed_frame(seq: int, at: datetime) -> list[Any]:
    """Plain beats of every run, and among them each kind the hand path leaves alone."""
    later = at + timedelta(seconds=1)
    beats: list[Any] = [_beat(i, seq + i, at) for i in range(0, 40)]
    beats += [
        _beat(1, seq - 100, at - timedelta(seconds=5)),  # stale: seq and time older
        _beat(2, seq - 100, later),  # lower seq, newer time: not provably stale
        _beat(3, seq + 500, later, progress=1.5),  # out of range
        _beat(4, seq + 500, later, progress=1),  # an int: pydantic's float
        _beat(5, seq + 500, later, resources=[{"id": "gpu-0", "kind": "gpu"}]),
        _beat(6, seq + 500, later, details={"step": "embed", "n": 3}),
        _beat(7, seq + 500, later, details=None),  # refused: details must be an object
        _beat(8, seq + 500, at + timedelta(seconds=120)),  # ahead of the clock: refused
        {**_beat(9, seq + 500, later), "at": "2026-12-04T12:00:01"},  # naive: taken as UTC
        {**_beat(10, seq + 500, later), "at": "yesterday"},
        {**_beat(11, seq + 500, later), "context": "other"},  # no such run there: held
        {**_beat(12, seq + 500, later), "context": "nowhere"},  # unknown backend
        {**_beat(13, seq + 500, later), "extra": 1},  # unknown field: ignored by pydantic
        {**_beat(14, seq + 500, later), "type": "ping"},
        "not a beat",
        _beat(15, seq + 500, later, in_flight_step="tool:search", phase="waiting"),
        _beat(16, seq + 500, later, interval_s=2.0),  # another cadence: the merge path
        {**_beat(17, seq + 500, later), "seq": True},  # a bool is not a seq here
        {k: v for k, v in _beat(18, seq + 500, later).items() if k != "at"},  # at: now
        _beat(20, seq + 600, later),  # the same run twice in a frame: the later one counts
        _beat(21, seq + 500, later, resources=[]),  # irq's helper: none held, by hand
        _beat(22, seq + 500, later, resources=None),
        _beat(23, seq + 500, later, resources={}),  # not a list: refused
        _beat(24, seq + 500, later, resources=[{"id": "gpu-1", "kind": "gpu"}]),
        heartbeat_frame(native_id="r25", seq=seq + 500, at=later, progress=0.5, phase="running",
                        interval_s=5.0, context="local"),  # what the helper sends
        # runs no plain beat above reports (r40-r48), holding resources:
        # the same in every frame: by hand from the second frame on
        _beat(40, seq + 500, later, resources=[Resource(id="gpu-2", kind="gpu").contract()]),
        heartbeat_frame(native_id="r41", seq=seq + 500, at=later, phase="running",
                        context="local", resources=[{"id": "gpu-3", "kind": "gpu"}]),
        _beat(42, seq + 500, later, resources=[{"id": "gpu-4"}, {"id": "kv", "kind": "cache",
                                                                "on_pause": "snapshot"}]),
        # resources that change from frame to frame: the general path each time
        _beat(43, seq + 500, later, resources=[
            {"id": "gpu-5", "state": "released" if seq >= 30_000 else "held"}]),
        _beat(44, seq + 500, later, resources=[  # released, then left out: held again
            {"id": "gpu-6", "state": "released"} if seq < 30_000 else {"id": "gpu-6"}]),
        _beat(45, seq + 500, later, resources=[{"id": "gpu-7", "extra": seq}]),  # ignored
        _beat(46, seq + 500, later, resources=[{"id": 7 if seq >= 30_000 else "7"}]),
        _beat(47, seq + 500, later, resources=[{"id": "gpu-8"}] * (1 + seq // 10_000)),
        _beat(48, seq + 500, later, resources=["gpu-9"]),  # not an object: refused
    ]
    return beats


@pytest.mark.parametrize("runs", [50, HISTORY_RUNS + 50])
def test_the_hand_path_keeps_what_the_general_path_keeps(runs: int) -> None:
    clock = Clock()
    by_hand = Gateway(runs, by_hand=True, clock=clock)
    general = Gateway(runs, by_hand=False, clock=clock)
    every = [_beat(i, 1_000, NOW - timedelta(seconds=1)) for i in range(runs)]
    for start in range(0, runs, 1000):  # first beats bind every run (the general path)
        for gw in (by_hand, general):
            gw.frame(every[start:start + 1000], AGENT, A)
    by_hand.hub.focus(["dbos:local/r30"])  # a focused run keeps its history either way
    general.hub.focus(["dbos:local/r30"])
    for k in range(3):
        clock.now = NOW + timedelta(seconds=2 * k)
        frame = _mixed_frame(10_000 * (k + 1), clock.now)
        for gw in (by_hand, general):
            gw.frame(frame, AGENT, A)
            gw.frame([_beat(0, 90_000 + k, clock.now)], OTHER, B)  # bound to A: refused
            gw.frame([_beat(1, 90_000 + k, clock.now), _beat(2, 90_000 + k, clock.now)],
                     SCOPED, S)  # r1 in scope but bound to A; r2 out of scope
    assert by_hand.hub.plain_beats.taken > 0 and general.hub.plain_beats.taken == 0
    assert by_hand.state() == general.state()
    refused = {detail.split(";")[0] for _target, detail in by_hand.state()["refused"]}
    assert refused  # the refusals happened (the two gateways agree on them above)


def test_a_new_connection_of_the_same_token_rebinds_through_the_general_path() -> None:
    clock = Clock()
    gw = Gateway(10, by_hand=True, clock=clock)
    gw.frame([_beat(i, 1, NOW) for i in range(10)], AGENT, A)
    again = Reporter("tok-a", "agent-a")  # the worker reconnected: a new reporter
    taken = gw.hub.plain_beats.taken
    gw.frame([_beat(i, 2, NOW) for i in range(10)], AGENT, again)
    assert gw.hub.plain_beats.taken == taken  # first beats of the new connection
    assert all(gw.hub.beats.bound[f"dbos:local/r{i}"] is again for i in range(10))
    gw.frame([_beat(i, 3, NOW) for i in range(10)], AGENT, again)
    assert gw.hub.plain_beats.taken == taken + 10
    assert {f.seq for f in gw.hub.beats.facts.values()} == {3}


def test_a_run_holding_the_same_resources_is_taken_by_hand_after_its_first_such_beat() -> None:
    clock = Clock()
    gw = Gateway(3, by_hand=True, clock=clock)
    gpu = {"id": "gpu-0", "kind": "gpu"}
    gw.frame([_beat(i, 1, NOW, resources=[gpu]) for i in range(3)], AGENT, A)  # binds
    gw.frame([_beat(i, 2, NOW, resources=[gpu]) for i in range(3)], AGENT, A)
    taken = gw.hub.plain_beats.taken
    gw.frame([_beat(i, 3, NOW, resources=[gpu]) for i in range(3)], AGENT, A)
    assert gw.hub.plain_beats.taken == taken + 3
    held = gw.hub.beats.facts["dbos:local/r0"].resources
    assert held == [Resource(id="gpu-0", kind="gpu")]
    gw.frame([_beat(0, 4, NOW, resources=[{**gpu, "state": "released"}])], AGENT, A)
    assert gw.hub.plain_beats.taken == taken + 3  # another report: the general path
    assert gw.hub.runs["dbos:local/r0"].resources[0].state == "released"


def test_a_plain_time_is_aware_and_not_ahead_of_the_clock() -> None:
    assert plain_time("2026-12-04T12:00:00Z", NOW) == NOW
    assert plain_time("2026-12-04T12:00:00", NOW) == NOW
    assert plain_time("2026-12-04T13:00:00+01:00", NOW) == NOW
    assert plain_time("2026-12-04T12:00:31+00:00", NOW) is None  # 31 s ahead
    assert plain_time("2026-12-04 12:00:00", NOW) is None  # not the plain form
    assert plain_time("2026-13-04T12:00:00", NOW) is None  # no such month


A = Reporter("tok-a", "agent-a")
B = Reporter("tok-b", "agent-b")
S = Reporter("tok-s", "agent-s")
