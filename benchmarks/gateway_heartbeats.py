"""Gateway throughput: N runs, agents pushing R heartbeats/s, one subscribed client.

Prints: heartbeats accepted per second, run events and frames delivered to the client per
second, heartbeat-to-client latency (p50/p95/max), gateway CPU (% of one core) and RSS.

The gateway runs in its own process. Its backend is a synthetic one that reports N running
runs: this measures the gateway's hub, coalescing and fan-out, not an adapter (adapters have
their own benchmarks against real servers).

    .venv/bin/python benchmarks/gateway_heartbeats.py --runs 10000 --rate 1000 --seconds 15
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend_adapters.base import (  # noqa: E402
    ActionCapability,
    ActionOutcome,
    Capabilities,
    Observation,
)
from benchmarks.results_file import write_results  # noqa: E402
from console.model import Action, Run  # noqa: E402


class SyntheticBackend:
    """Reports ``n`` running runs; every action is a no-op. For this benchmark only."""

    name = "bench"
    context = "local"
    url = "synthetic://"
    poll_interval_s = 5.0

    def __init__(self, n: int) -> None:
        now = datetime.now(UTC)
        self.runs = [
            Run(id=Run.make_id("bench", "local", f"run-{i:05d}"), backend="bench",
                context="local", native_id=f"run-{i:05d}", name="synthetic", started_at=now)
            for i in range(n)
        ]

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def capabilities(self) -> Capabilities:
        return Capabilities(backend="bench", actions={
            a: ActionCapability(False, "synthetic") for a in Action if a is not Action.DECIDE})

    async def observe(self) -> Observation:
        return Observation(runs=list(self.runs))

    def focus(self, native_ids: set[str]) -> None: ...

    async def noop(self, *args: object, **kwargs: object) -> ActionOutcome:
        return ActionOutcome(detail="synthetic")


def _serve(port: int, home: str, runs: int) -> None:
    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings

    async def main() -> None:
        gw = Gateway(GatewaySettings(port=port, home=Path(home)))
        backend = SyntheticBackend(runs)
        gw.add_backend("bench:local", backend)  # type: ignore[arg-type]
        await gw.start()
        await asyncio.Event().wait()

    asyncio.run(main())


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _agents(url: str, token: str, runs: int, rate: int, seconds: float,
                  sent: list[int]) -> None:
    from websockets.asyncio.client import connect

    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url + "/agent", additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1}))
        tick = 0.01
        per_tick = max(1, int(rate * tick))
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < seconds:
            for _ in range(per_tick):
                native = f"run-{i % runs:05d}"
                await ws.send(json.dumps({
                    "type": "heartbeat", "backend": "bench", "native_id": native, "seq": i,
                    "at": datetime.now(UTC).isoformat(), "progress": (i % 100) / 100,
                    "interval_s": 10.0, "timeout_s": 60.0,
                }))
                i += 1
            sent[0] = i
            next_at = start + (i / per_tick) * tick
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


def _push(url: str, token: str, runs: int, rate: int, seconds: float, sent: object) -> None:
    box = [0]

    async def go() -> None:
        task = asyncio.create_task(_agents(url, token, runs, rate, seconds, box))
        while not task.done():
            await asyncio.sleep(0.2)
            sent.value = box[0]  # type: ignore[attr-defined]
        await task
        sent.value = box[0]  # type: ignore[attr-defined]

    asyncio.run(go())


async def _client(url: str, token: str, seconds: float, stats: dict) -> None:
    from console.client import GatewayClient

    async with GatewayClient(url, token) as client:
        stats["snapshot_runs"] = len(client.view.runs)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                batch = await asyncio.wait_for(client.updates(), 1)
            except TimeoutError:
                continue
            if batch is None:
                break
            now = datetime.now(UTC)
            stats["frames"] += 1
            for ev in batch:
                if ev.get("kind") != "run":
                    continue
                stats["events"] += 1
                at = ev["data"].get("heartbeat_at")
                if at:
                    stats["lat"].append((now - datetime.fromisoformat(at)).total_seconds())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--rate", type=int, default=1000, help="heartbeats per second")
    ap.add_argument("--seconds", type=float, default=15.0)
    args = ap.parse_args()

    from console.gateway.auth import create_token
    from console.model import Role
    from console.processes import free_port

    home = tempfile.mkdtemp(prefix="irq-bench-")
    agent = create_token(Role.AGENT, "bench-agent", Path(home))
    viewer = create_token(Role.VIEWER, "bench-viewer", Path(home))
    port = free_port()
    proc = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(port, home, args.runs), daemon=True)
    proc.start()
    url = f"ws://127.0.0.1:{port}"
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    time.sleep(1.5)  # first poll of the synthetic backend

    stats: dict = {"frames": 0, "events": 0, "lat": []}
    sent = multiprocessing.get_context("spawn").Value("i", 0)
    pusher = multiprocessing.get_context("spawn").Process(
        target=_push, args=(url, agent, args.runs, args.rate, args.seconds, sent), daemon=True)

    async def run() -> tuple[float, float]:
        cpu0, t0 = _cpu_seconds(proc.pid), time.monotonic()
        pusher.start()  # agents in their own process, so the client measures only itself
        await _client(url, viewer, args.seconds + 1.0, stats)
        pusher.join(10)
        return _cpu_seconds(proc.pid) - cpu0, time.monotonic() - t0

    cpu, wall = asyncio.run(run())
    sent = [sent.value]
    lat = sorted(stats["lat"]) or [0.0]
    print(f"runs {args.runs}, target {args.rate} heartbeats/s for {args.seconds:g}s "
          f"(snapshot had {stats['snapshot_runs']} runs)")
    print(f"  heartbeats sent      {sent[0] / args.seconds:8.0f} /s")
    print(f"  run events delivered {stats['events'] / wall:8.0f} /s in {stats['frames'] / wall:.1f} frames/s")
    print(f"  heartbeat->client    p50 {statistics.median(lat) * 1000:6.0f} ms   "
          f"p95 {lat[int(0.95 * (len(lat) - 1))] * 1000:6.0f} ms   max {lat[-1] * 1000:6.0f} ms")
    print(f"  gateway CPU          {100 * cpu / wall:8.1f} % of one core")
    rss = _rss_mb(proc.pid)
    print(f"  gateway RSS          {rss:8.0f} MB")
    write_results("gateway_heartbeats", {
        "runs": args.runs, "rate_offered": args.rate, "seconds": args.seconds,
        "heartbeats_sent_per_s": round(sent[0] / args.seconds),
        "run_events_per_s": round(stats["events"] / wall),
        "frames_per_s": round(stats["frames"] / wall, 1),
        "heartbeat_to_client_ms": {"p50": round(statistics.median(lat) * 1000),
                                   "p95": round(lat[int(0.95 * (len(lat) - 1))] * 1000),
                                   "max": round(lat[-1] * 1000)},
        "gateway_cpu_pct": round(100 * cpu / wall, 1), "gateway_rss_mb": round(rss),
    })
    proc.kill()
    proc.join(5)


if __name__ == "__main__":
    main()
