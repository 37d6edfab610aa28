"""A flood of heartbeats for 400,000 made-up run ids leaves a real gateway's memory flat.

The gateway runs as its own process (``irq serve``); its RSS is read from /proc/PID/status.
Before the bound on beats of unknown runs, the same flood took it from ~110 MB to over 1 GB."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

from console.gateway.auth import create_token
from console.model import Role
from console.processes import ChildProcess, free_port

TOTAL = 400_000
CONNECTIONS = 4  # one agent token each (the per-token budget is 10,000 frames/s)
BATCH = 1_000  # frames between two pings: the flood goes as fast as the gateway reads
WARM = 40_000  # after this many the store of unknown beats is full (10,000 runs)
GROWTH_BOUND_MB = 60  # RSS growth allowed between WARM and TOTAL beats


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _wait_ready(url: str, token: str, proc: ChildProcess) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.alive(), proc.log_tail()
        try:
            async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}):
                return
        except OSError:
            assert time.monotonic() < deadline, "the gateway did not come up"
            await asyncio.sleep(0.2)


def _masked_text_frame(payload: bytes) -> bytes:
    """One client text frame as RFC 6455 puts it on the wire (a zero mask key is legal and
    leaves the payload as it is), so the test writes frames without websockets' per-frame
    work and the gateway alone sets the pace."""
    size = len(payload)
    head = bytes([0x81, 0x80 | size]) if size < 126 else bytes([0x81, 0x80 | 126]) + \
        size.to_bytes(2, "big")
    return head + b"\0\0\0\0" + payload


async def _pong(ws: ClientConnection, tag: str) -> None:
    """Wait for the gateway to have read up to here. A ping over the budget is dropped like
    any frame (the gateway says so with a rate_limited error): then ask again."""
    for attempt in range(100):
        ping = f"{tag}.{attempt}"
        await ws.send(json.dumps({"type": "ping", "id": ping}))
        deadline = time.monotonic() + 2.0
        try:
            while True:
                reply = json.loads(await asyncio.wait_for(
                    ws.recv(), max(0.01, deadline - time.monotonic())))
                if reply == {"type": "pong", "id": ping}:
                    return
        except TimeoutError:
            continue
    raise AssertionError("the gateway never answered a ping")


async def _flood(url: str, token: str, lane: int, count: int, sent: list[int]) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url + "/agent", additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1}))
        head, tail = json.dumps({
            "type": "heartbeat", "backend": "dbos", "native_id": "@", "seq": 1,
            "at": datetime.now(UTC).isoformat(), "progress": 0.5, "details": {"step": "s" * 200},
            "interval_s": 2.0, "timeout_s": 10.0}).split('"@"')
        for start in range(0, count, BATCH):
            ws.transport.write(b"".join(  # the flood costs the test process next to nothing
                _masked_text_frame(f'{head}"ghost-{lane}-{i}"{tail}'.encode())
                for i in range(start, min(count, start + BATCH))))
            await _pong(ws, str(start))
            sent[lane] = min(count, start + BATCH)


async def test_flooding_unknown_run_ids_keeps_the_gateway_rss_flat(tmp_path: Path):
    port = free_port()
    tokens = [create_token(Role.AGENT, f"flood-{i}", tmp_path, scopes=["dbos:local"])
              for i in range(CONNECTIONS)]
    viewer = create_token(Role.VIEWER, "watch", tmp_path)
    proc = ChildProcess(
        name="gateway",
        argv=[sys.executable, "-m", "console.cli.app", "serve", "--host", "127.0.0.1",
              "--port", str(port), "--backend",
              f"dbos+sqlite:///{tmp_path}/none/sys.db?poll=5"],
        log=tmp_path / "gateway.log", env={"IRQ_HOME": str(tmp_path)})
    proc.start()
    url = f"ws://127.0.0.1:{port}"
    try:
        await _wait_ready(url, viewer, proc)
        assert proc.pid is not None
        start_rss = _rss_mb(proc.pid)
        sent = [0] * CONNECTIONS
        per_lane = TOTAL // CONNECTIONS
        started = time.monotonic()
        floods = [asyncio.create_task(_flood(url, tokens[i], i, per_lane, sent))
                  for i in range(CONNECTIONS)]
        while sum(sent) < WARM:
            assert not any(f.done() and f.exception() for f in floods)
            await asyncio.sleep(0.05)
        warm_rss = _rss_mb(proc.pid)
        peak = warm_rss
        while not all(f.done() for f in floods):
            peak = max(peak, _rss_mb(proc.pid))
            await asyncio.sleep(0.2)
        for f in floods:
            f.result()
        seconds = time.monotonic() - started
        end_rss = _rss_mb(proc.pid)
        peak = max(peak, end_rss)
        from console.client import GatewayClient

        async with GatewayClient(url, viewer) as client:
            stats = await client.query("stats")
    finally:
        proc.stop()
    held = stats["unknown_beats"]
    print(f"\n{TOTAL} unknown ids in {seconds:.1f} s; RSS start {start_rss:.0f} MB, after "
          f"{WARM}: {warm_rss:.0f} MB, peak {peak:.0f} MB, end {end_rss:.0f} MB; held "
          f"{held['runs']} runs / {held['bytes']} bytes, evicted {held['evicted']}; "
          f"rate-limited {stats['counters'].get('agent_rate_limited', 0)}")
    assert held["runs"] <= held["max_runs"] and held["bytes"] <= held["max_bytes"]
    limited = stats["counters"].get("agent_rate_limited", 0)  # beats and pings over budget
    assert held["evicted"] + held["runs"] <= TOTAL <= held["evicted"] + held["runs"] + limited
    assert held["evicted"] >= TOTAL // 2  # the store filled and turned over many times
    assert peak - warm_rss < GROWTH_BOUND_MB, (warm_rss, peak)
