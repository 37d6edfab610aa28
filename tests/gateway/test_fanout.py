"""Fan-out on real websockets: a client that stops reading is resynced from a snapshot while
the others keep getting every event; a filtered subscription gets only what it asked for."""

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
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Interrupt, Role, Run, utcnow


async def _viewer_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **settings: Any
                          ) -> AsyncIterator[tuple[Gateway, str, str]]:
    """A gateway with ``settings`` and a viewer token: (gateway, url, token)."""
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    token = create_token(Role.VIEWER, "viewer-test", tmp_path)
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, **settings))
    await gw.start()
    try:
        yield gw, f"ws://127.0.0.1:{gw.port}", token
    finally:
        await gw.stop()


@pytest.fixture
async def small_lag_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                            ) -> AsyncIterator[tuple[Gateway, str, str]]:
    async for running in _viewer_gateway(tmp_path, monkeypatch, flush_interval_s=0.02,
                                         max_client_lag=200):
        yield running


async def _hello(url: str, token: str, **hello: Any) -> Any:
    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                       max_size=None)
    await ws.send(json.dumps({"type": "hello", "protocol": 1, **hello}))
    assert json.loads(await ws.recv())["type"] == "welcome"
    return ws


async def _until(ws: Any, pred: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Frames read until ``pred(frame)`` is true (that frame included)."""
    frames: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
        frames.append(frame)
        if pred(frame):
            return frames


async def test_a_client_that_stops_reading_is_resynced_and_never_stalls_the_others(
        small_lag_gateway):
    gw, url, token = small_lag_gateway
    # the slow client: a tiny receive window and a one-frame library queue, then no reads
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", gw.port))
    slow = await connect(url, sock=sock, max_queue=1, max_size=None,
                         additional_headers={"Authorization": f"Bearer {token}"})
    await slow.send(json.dumps({"type": "hello", "protocol": 1}))
    assert json.loads(await slow.recv())["type"] == "welcome"
    assert json.loads(await slow.recv())["type"] == "snapshot"
    fast = await _hello(url, token)
    assert json.loads(await fast.recv())["type"] == "snapshot"

    got: list[int] = []

    async def read_fast() -> None:
        while len(got) < 3000:
            frame = json.loads(await fast.recv())
            got.extend(e["seq"] for e in frame.get("events", []) if e["kind"] == "notice")

    reader = asyncio.create_task(read_fast())
    first = gw.hub.seq + 1
    bulky = "x" * 4000  # 3,000 notices of 4 KB: far more than the socket buffers hold
    started = time.monotonic()
    for i in range(3000):
        gw.hub.publish("notice", {"level": "info", "run_id": None, "message": f"{i} {bulky}"})
        if i % 50 == 0:
            await asyncio.sleep(0.005)
    await asyncio.wait_for(reader, 30)
    # every event reached the reading client, in order, while the other one read nothing
    assert got == list(range(first, first + 3000))
    assert time.monotonic() - started < 30
    # what the gateway holds for the silent client is bounded (one frame in flight, the
    # rest is the shared log), and it has been marked for a resync
    for ws in gw.connections.open_sessions:
        assert ws.transport.get_write_buffer_size() < 8 << 20
    assert gw.hub.seq - min(s.cursor for s in gw.hub.subscribers) > 200

    # it reads again: a fresh snapshot instead of the backlog, then it is current
    frames = await _until(slow, lambda f: f["type"] == "snapshot", timeout=30)
    snap = frames[-1]
    assert snap["seq"] >= first + 200
    assert gw.counters["client_resyncs"] >= 1
    gw.hub.publish("notice", {"level": "info", "run_id": None, "message": "after"})
    tail = await _until(slow, lambda f: any(
        e["data"].get("message") == "after" for e in f.get("events", [])), timeout=30)
    assert tail
    await slow.close()
    await fast.close()


async def test_a_filtered_subscription_gets_only_its_context_and_the_inbox_only_interrupts(
        gateway):
    hub = gateway.gateway.hub
    runs = [Run(id=f"dbos:{ctx}/wf-{i}", backend="dbos", context=ctx, native_id=f"wf-{i}")
            for ctx in ("local", "other") for i in range(3)]
    hub.observe_runs(runs)
    token = gateway.tokens["viewer"]
    local = await _hello(gateway.url, token, filter={"contexts": ["dbos:local"]})
    inbox = await _hello(gateway.url, token,
                         filter={"kinds": ["interrupt", "interrupt_removed"]})
    everything = await _hello(gateway.url, token)
    snaps = [json.loads(await ws.recv()) for ws in (local, inbox, everything)]
    assert {r["context"] for r in snaps[0]["runs"]} == {"local"} and len(snaps[0]["runs"]) == 3
    assert snaps[1]["runs"] == [] and len(snaps[2]["runs"]) == 6

    for ctx in ("other", "local"):
        hub.observe_interrupts(f"dbos:{ctx}", [Interrupt(
            id=f"dbos:{ctx}/wf-0#ask", run_id=f"dbos:{ctx}/wf-0", native_id="ask",
            title=f"ask {ctx}")], True, lambda _iid: None)
        hub.publish("notice", {"level": "info", "run_id": f"dbos:{ctx}/wf-1",
                               "message": f"notice {ctx}"})
    hub.publish("notice", {"level": "info", "run_id": None, "message": "for everyone"})

    def last(f: dict[str, Any]) -> bool:
        return any(e["data"].get("message") == "for everyone" or (
            e["kind"] == "interrupt" and e["data"]["run_id"] == "dbos:local/wf-0")
            for e in f.get("events", []))

    def events(ws_frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for f in ws_frames for e in f.get("events", [])]

    seen_local = events(await _until(local, lambda f: any(
        e["data"].get("message") == "for everyone" for e in f.get("events", []))))
    scopes = {(e["data"].get("run_id") or e["data"].get("id") or "-").split("/")[0]
              for e in seen_local if e["kind"] != "notice" or e["data"].get("run_id")}
    assert scopes == {"dbos:local"}
    assert {e["kind"] for e in seen_local} >= {"interrupt", "run", "notice"}
    assert "notice other" not in {e["data"].get("message") for e in seen_local}

    seen_inbox = events(await _until(inbox, last))
    assert {e["kind"] for e in seen_inbox} == {"interrupt"}
    assert len(seen_inbox) == 2  # both contexts' interrupts, nothing else

    seen_all = events(await _until(everything, lambda f: any(
        e["data"].get("message") == "for everyone" for e in f.get("events", []))))
    assert {"notice other", "notice local"} <= {e["data"].get("message") for e in seen_all}
    for ws in (local, inbox, everything):
        await ws.close()


async def test_compact_beats_carry_the_heartbeat_and_legacy_clients_get_full_runs(gateway):
    from console.gateway.protocol import AgentHeartbeat

    hub = gateway.gateway.hub
    hub.observe_runs([Run(id="dbos:local/wf", backend="dbos", context="local",
                          native_id="wf")])
    token = gateway.tokens["viewer"]
    compact = await _hello(gateway.url, token, beats="compact")
    legacy = await _hello(gateway.url, token)
    for ws in (compact, legacy):
        assert json.loads(await ws.recv())["type"] == "snapshot"
    beat = dict(type="heartbeat", backend="dbos", native_id="wf", interval_s=5.0)
    hub.agent_heartbeat("dbos:local/wf", AgentHeartbeat(**beat, seq=1, progress=0.1))
    hub.flush_heartbeats()  # first beat: the cadence changes, a full run event for all
    hub.agent_heartbeat("dbos:local/wf", AgentHeartbeat(**beat, seq=2, progress=0.2))
    hub.flush_heartbeats()  # only heartbeat time and progress changed: a beat event

    def has_02(f: dict[str, Any]) -> bool:
        return any(e["data"].get("progress") == 0.2 for e in f.get("events", []))

    got_compact = [e for f in await _until(compact, has_02) for e in f.get("events", [])]
    got_legacy = [e for f in await _until(legacy, has_02) for e in f.get("events", [])]
    assert [e["kind"] for e in got_compact][-1] == "beat"
    assert set(got_compact[-1]["data"]) == {"id", "heartbeat_at", "progress"}
    assert got_legacy[-1]["kind"] == "run" and got_legacy[-1]["data"]["state"] == "running"
    assert got_legacy[-1]["seq"] == got_compact[-1]["seq"]  # one event, two forms
    await compact.close()
    await legacy.close()


@pytest.fixture
async def slow_beats_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                             ) -> AsyncIterator[tuple[Gateway, str, str]]:
    """Beats flushed to clients only every 60 s; state events within 10 ms."""
    async for running in _viewer_gateway(tmp_path, monkeypatch, flush_interval_s=60.0,
                                         state_flush_s=0.01):
        yield running


async def test_a_state_event_is_not_held_behind_the_beats_flush_interval(slow_beats_gateway):
    """A client woken by beats waits out the beats' flush interval; a state event published
    meanwhile goes out at once, with the beats before it (nothing reordered or lost)."""
    from console.gateway.protocol import AgentHeartbeat

    gw, url, token = slow_beats_gateway
    hub = gw.hub
    hub.observe_runs([Run(id="dbos:local/wf", backend="dbos", context="local", native_id="wf")])
    ws = await _hello(url, token, beats="compact")
    assert json.loads(await ws.recv())["type"] == "snapshot"
    beat = dict(type="heartbeat", backend="dbos", native_id="wf", interval_s=5.0)
    hub.agent_heartbeat("dbos:local/wf", AgentHeartbeat(**beat, seq=1, progress=0.1))
    hub.flush_heartbeats()  # the first beat: a state event (the cadence is new)
    await _until(ws, lambda f: f.get("type") == "events")
    seen = hub.seq
    hub.agent_heartbeat("dbos:local/wf", AgentHeartbeat(**beat, seq=2, progress=0.2))
    hub.flush_heartbeats()  # a beat: the flusher now waits out its 60 s interval
    await asyncio.sleep(0.2)
    hub.publish("notice", {"level": "info", "run_id": None, "message": "now"})
    # within the test's 10 s, far less than the 60 s interval the beat alone would wait
    frames = await _until(ws, lambda f: any(
        e["kind"] == "notice" for e in f.get("events", [])))
    events = [e for f in frames for e in f.get("events", []) if e["seq"] > seen]
    assert events[-1]["kind"] == "notice"
    assert events[0]["data"]["progress"] == 0.2  # the beat, in order, before it
    assert [e["seq"] for e in events] == list(range(seen + 1, seen + 1 + len(events)))
    await ws.close()


async def test_a_console_on_compact_beats_sees_the_runs_a_full_client_sees(gateway):
    """The console (GatewayClient(compact_beats=True), as the TUI connects) applies beat
    events to its runs: its view holds what a client given whole run events holds."""
    from console.client import GatewayClient
    from console.gateway.protocol import AgentHeartbeat

    hub = gateway.gateway.hub
    hub.observe_runs([Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local",
                          native_id=f"wf-{i}") for i in range(3)])
    token = gateway.tokens["viewer"]
    compact = GatewayClient(gateway.url, token, compact_beats=True)
    full = GatewayClient(gateway.url, token)
    await compact.connect()
    await full.connect()
    for seq in (1, 2, 3):
        for i in range(3):
            hub.agent_heartbeat(f"dbos:local/wf-{i}", AgentHeartbeat(
                type="heartbeat", backend="dbos", native_id=f"wf-{i}", interval_s=5.0,
                seq=seq, progress=seq / 10 + i / 100))
        hub.flush_heartbeats()
    kinds: set[str] = set()
    for client in (compact, full):
        while client.view.seq < hub.seq:
            batch = await asyncio.wait_for(client.updates(), 5)
            assert batch is not None
            if client is compact:
                kinds |= {e["kind"] for e in batch}
    assert "beat" in kinds  # the later beats came compact
    assert compact.view.runs.keys() == full.view.runs.keys()
    now = utcnow()
    for run_id, run in full.view.runs.items():
        assert compact.view.runs[run_id].contract(now) == run.contract(now), run_id
        assert run.progress is not None and run.heartbeat_at is not None
    await compact.close()
    await full.close()
