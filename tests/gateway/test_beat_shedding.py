"""Shedding heartbeat-age updates before state changes (console/gateway/beat_shedding.py).

On real websockets: a client that fell more than ``shed_after_s`` behind is sent its
backlog's state changes and ``shed`` markers instead of its beats -- its sequence stays
contiguous, every state change arrives, the count shows in the gateway's stats -- while a
client that keeps up gets every beat; once caught up it gets beats again. The marks' and the
decision's logic is tested with an injected clock."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from console.gateway.auth import create_token
from console.gateway.beat_shedding import BeatShedding, PublishMarks
from console.gateway.event_log import Subscriber
from console.gateway.protocol import AgentHeartbeat
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role, Run


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_marks_say_how_long_ago_the_first_unsent_event_was_published() -> None:
    clock = Clock()
    marks = PublishMarks(clock)
    marks.note(10)
    clock.t += 1.0
    marks.note(25)
    clock.t += 0.5
    assert marks.age_after(0) == pytest.approx(1.5)  # seq 1..10 published by the first mark
    assert marks.age_after(10) == pytest.approx(0.5)  # 11..25 by the second
    assert marks.age_after(25) == 0.0  # nothing published after the last mark


def test_a_client_sheds_past_the_threshold_until_it_has_been_current_for_hold_s() -> None:
    clock = Clock()
    marks = PublishMarks(clock)
    shedding = BeatShedding(marks, shed_after_s=0.3, hold_s=1.0)
    sub = Subscriber(wake=lambda: None, cursor=0)
    marks.note(100)
    clock.t += 0.2
    assert not shedding.judge(sub)  # 0.2 s behind
    clock.t += 0.2
    assert shedding.judge(sub) and shedding.episodes == 1  # 0.4 s
    marks.note(200)
    sub.cursor = 100
    clock.t += 0.2
    assert shedding.judge(sub)  # still 0.2 s behind: above half the threshold
    sub.cursor = 200
    clock.t += 0.5
    assert shedding.judge(sub)  # caught up, but not for hold_s yet
    clock.t += 0.6
    assert not shedding.judge(sub) and not sub.shedding  # current for over hold_s


@pytest.fixture
async def shedding_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                           ) -> AsyncIterator[tuple[Gateway, str, str]]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    token = create_token(Role.VIEWER, "viewer-test", tmp_path)
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, flush_interval_s=0.02,
                                 shed_after_s=0.2, shed_hold_s=0.3))
    await gw.start()
    try:
        yield gw, f"ws://127.0.0.1:{gw.port}", token
    finally:
        await gw.stop()


RUNS = [Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local", native_id=f"wf-{i}")
        for i in range(100)]


def beat_all(gw: Gateway, seq: int) -> None:
    for run in RUNS:
        gw.hub.agent_heartbeat(run.id, AgentHeartbeat(
            type="heartbeat", backend="dbos", native_id=run.native_id, seq=seq,
            interval_s=5.0, progress=(seq % 100) / 100))
    gw.hub.flush_heartbeats()


async def read_until(ws: Any, message: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not any(e["kind"] == "notice" and e["data"]["message"] == message for e in events):
        frame = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
        events.extend(frame.get("events", []))
    return events


async def until(predicate: Any, what: str, timeout: float = 10.0) -> None:
    """Let the gateway run until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def contiguous(events: list[dict[str, Any]]) -> bool:
    """Each event follows the one before (a ``shed`` marker covers from..seq)."""
    seq = events[0]["seq"] - 1
    for e in events:
        first = e["data"]["from"] if e["kind"] == "shed" else e["seq"]
        if first != seq + 1:
            return False
        seq = e["seq"]
    return True


async def test_a_client_behind_gets_state_changes_and_shed_markers_instead_of_beats(
        shedding_gateway: tuple[Gateway, str, str]) -> None:
    gw, url, token = shedding_gateway
    gw.hub.observe_runs(RUNS)
    beat_all(gw, 1)  # first beats: the cadence changes, full run events
    headers = {"Authorization": f"Bearer {token}"}
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", gw.port))
    slow = await connect(url, sock=sock, max_queue=1, max_size=None, additional_headers=headers)
    fast = await connect(url, max_size=None, additional_headers=headers)
    for ws in (slow, fast):
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "beats": "compact"}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        assert json.loads(await ws.recv())["type"] == "snapshot"
    fast_events: list[dict[str, Any]] = []
    fast_reader = asyncio.create_task(_collect(fast, fast_events))

    def cursors() -> list[int]:
        return [sub.cursor for sub in gw.hub.subscribers]

    # the slow client's flusher blocks on sends far larger than the socket buffers (frames
    # of 400 KB, each flushed before the next is published: its library holds one, the
    # kernel a little) ...
    for i in range(300):
        gw.hub.publish("notice", {"level": "info", "run_id": None, "message": f"big {i}",
                                  "pad": "x" * 40_000})
        if i % 10 == 9:
            await until(lambda published=gw.hub.seq: max(cursors()) >= published,
                        "the notices flushed")
    # ... while the fleet beats and a state change happens
    for n in range(2, 12):
        beat_all(gw, n)
        await until(lambda: max(cursors()) >= gw.hub.seq, "the beats flushed")
    gw.hub.publish("notice", {"level": "info", "run_id": None, "message": "after"})
    # the slow client's oldest unsent event is past the threshold (0.2 s beyond the flush)
    await until(lambda: gw.hub.events.marks.age_after(min(cursors())) > 0.3,
                "the slow client's backlog to age")

    got = await read_until(slow, "after")
    kinds = [e["kind"] for e in got]
    assert "shed" in kinds
    first_shed = kinds.index("shed")
    assert "beat" not in kinds[first_shed:]  # behind: no beats, only what changed state
    assert contiguous(got)
    assert {f"big {i}" for i in range(300)} <= {e["data"]["message"] for e in got
                                                if e["kind"] == "notice"}
    shed = sum(e["data"]["beats"] for e in got if e["kind"] == "shed")
    assert shed >= 100
    stats = gw.stats()
    assert stats["updates_shed"] >= shed and stats["shedding_episodes"] >= 1

    # the client that kept up got every beat, no marker
    await until(lambda: sum(1 for e in fast_events if e["kind"] == "beat") >= 1000,
                "the fast client's beats")
    assert not any(e["kind"] == "shed" for e in fast_events)

    # caught up (for longer than shed_hold_s): beats again
    tail: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while not any(e["kind"] == "beat" for e in tail):
        assert time.monotonic() < deadline, "the caught-up client never got beats again"
        beat_all(gw, 20 + len(tail))
        gw.hub.publish("notice", {"level": "info", "run_id": None,
                                  "message": f"later {len(tail)}"})
        tail += await read_until(slow, f"later {len(tail)}")
    assert contiguous(got + tail)
    fast_reader.cancel()
    await slow.close()
    await fast.close()


async def _collect(ws: Any, into: list[dict[str, Any]]) -> None:
    async for raw in ws:
        into.extend(json.loads(raw).get("events", []))


def test_a_client_behind_is_taken_its_state_events_and_markers_for_the_beats_between() -> None:
    from console.gateway.hub import Hub
    from console.gateway.shared_frames import SharedFrames

    hub = Hub()
    hub.observe_runs(RUNS[:3])
    sub = Subscriber(wake=lambda: None, cursor=hub.seq)
    for seq in (1, 2):  # the first beats change the cadence: state events
        for run in RUNS[:3]:
            hub.agent_heartbeat(run.id, AgentHeartbeat(
                type="heartbeat", backend="dbos", native_id=run.native_id, seq=seq,
                interval_s=5.0, progress=seq / 10))
        hub.flush_heartbeats()
    hub.publish("notice", {"level": "info", "run_id": None, "message": "between"})
    for run in RUNS[:3]:
        hub.agent_heartbeat(run.id, AgentHeartbeat(
            type="heartbeat", backend="dbos", native_id=run.native_id, seq=3,
            interval_s=5.0, progress=0.3))
    hub.flush_heartbeats()
    start = sub.cursor
    taken = hub.events.take_states(sub)
    assert taken is not None
    first, last, events = taken
    assert (first, last, sub.cursor) == (start + 1, hub.seq, hub.seq)
    assert [e["kind"] for e in events] == ["run", "run", "run", "notice"]
    frame, shed = SharedFrames(hub).shed_frame(first, last, events, None, True)
    assert frame is not None and shed == 6
    got = json.loads(frame)["events"]
    assert [e["kind"] for e in got] == ["run", "run", "run", "shed", "notice", "shed"]
    assert contiguous(got) and got[-1]["seq"] == hub.seq
    assert got[3]["data"] == {"from": start + 4, "beats": 3}
