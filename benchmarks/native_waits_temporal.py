"""Native waits on Temporal (issue 22): wait begins -> inbox item visible, at 1 and at 1,000
waiting workflows, and the requests the adapter puts on the server.

Starts a real dev server and the sample worker of ``tests/adapters/temporal/
native_wait_worker.py`` (written like Temporal's samples, no irq code: an activity proposes,
then ``wait_condition`` until the ``send_approval`` signal), opens the adapter as the registry
does and polls ``observe()`` every ``--poll`` seconds throughout. Then:

1. **1 waiting**: ``--probes`` times, one at a time: start a ``SignalApproval`` workflow,
   note when its item shows in an observation, answer it (the signal), so one waits at a
   time. Latency = observation time - the item's ``created_at`` (the event where the wait
   began, the server's clock on the same machine).
2. **1,000 waiting**: start ``--fleet`` workflows concurrently with the SDK client; they all
   wait (not answered). Time until the adapter shows all of them (the settle). Then the
   same probes with the fleet waiting.
3. After each phase (phase 1: with one workflow left waiting), ``--window`` seconds with nothing changing: the requests/s the adapter
   sends (its HTTP client's counters, by kind), and those native wait discovery itself sent
   (metadata queries, history reads).

Writes ``benchmarks/results/native_waits_temporal.json``.

Usage: ``python benchmarks/native_waits_temporal.py [--fleet 1000] [--rps 100] [--poll 0.25]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from backend_adapters.temporal.adapter import TemporalBackend  # noqa: E402
from backend_adapters.temporal.dev_server import DevServer  # noqa: E402
from benchmarks.latency_stats import dist  # noqa: E402
from console.model import InterruptKind  # noqa: E402
from console.processes import ChildProcess  # noqa: E402

TASK_QUEUE = "bench-native"
WORKER = ROOT / "tests" / "adapters" / "temporal" / "native_wait_worker.py"
RESULTS = ROOT / "benchmarks" / "results" / "native_waits_temporal.json"


class Watcher:
    """Polls observe() every ``poll_s``; remembers when each native wait was first seen."""

    def __init__(self, adapter: TemporalBackend, poll_s: float) -> None:
        self.adapter = adapter
        self.poll_s = poll_s
        self.first_seen: dict[str, tuple[datetime, datetime]] = {}  # wid -> (seen, created)
        self.observe_s: list[float] = []
        self.errors: list[str] = []

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                obs = await self.adapter.observe()
            except Exception as exc:  # a benchmark reports, it does not stop
                self.errors.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(self.poll_s)
                continue
            now = datetime.now(UTC)
            self.observe_s.append(time.monotonic() - started)
            for item in obs.interrupts:
                if item.kind is InterruptKind.HELPER:
                    continue
                wid = item.run_id.rsplit("/", 1)[1]
                self.first_seen.setdefault(wid, (now, item.created_at))
            await asyncio.sleep(max(0.0, self.poll_s - (time.monotonic() - started)))

    async def until_seen(self, wids: set[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if wids <= set(self.first_seen):
                return True
            await asyncio.sleep(0.05)
        return False


async def probes(client: Any, watcher: Watcher, n: int, tag: str) -> list[float]:
    """Start one waiting workflow at a time; its latency; answer it so it stops waiting."""
    latencies: list[float] = []
    for i in range(n):
        wid = f"probe-{tag}-{i}"
        handle = await client.start_workflow(
            "SignalApproval", {"timeout_s": 3600}, id=wid, task_queue=TASK_QUEUE
        )
        if not await watcher.until_seen({wid}, timeout=60):
            print(f"  {wid}: never seen within 60 s", flush=True)
            continue
        seen, created = watcher.first_seen[wid]
        latencies.append((seen - created).total_seconds())
        await handle.signal("send_approval", {"approved": True, "approver": "bench"})
    return latencies


async def window(adapter: TemporalBackend, seconds: float) -> dict[str, Any]:
    """Requests/s the adapter sent over ``seconds`` of steady observation."""
    stats, native = adapter.http.stats, adapter.native_waits.stats
    kinds0, meta0, reads0 = Counter(stats.by_kind), native.metadata_queries, native.history_reads
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - t0
    kinds = Counter(stats.by_kind)
    kinds.subtract(kinds0)
    return {
        "seconds": round(elapsed, 1),
        "requests_per_s": round(sum(kinds.values()) / elapsed, 2),
        "by_kind_per_s": {k: round(v / elapsed, 2) for k, v in sorted(kinds.items()) if v},
        "native_metadata_queries_per_s": round((native.metadata_queries - meta0) / elapsed, 3),
        "native_history_reads_per_s": round((native.history_reads - reads0) / elapsed, 3),
    }


async def start_fleet(client: Any, n: int, first: int = 0) -> float:
    sem = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with sem:
            await client.start_workflow(
                "SignalApproval", {"timeout_s": 86400}, id=f"fleet-{i}", task_queue=TASK_QUEUE
            )

    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(first, n)))
    return time.monotonic() - t0


async def bench(args: argparse.Namespace, server: DevServer) -> dict[str, Any]:
    from temporalio.client import Client

    client = await Client.connect(server.address)
    url = server.backend_url(rps=args.rps, poll=args.poll, query=f"TaskQueue='{TASK_QUEUE}'")
    adapter = open_backend(url, MemoryPauseLedger())
    assert isinstance(adapter, TemporalBackend)
    await adapter.start()
    watcher = Watcher(adapter, args.poll)
    task = asyncio.create_task(watcher.run())
    out: dict[str, Any] = {}
    try:
        print(f"phase 1: {args.probes} probes, one waiting at a time", flush=True)
        one = await probes(client, watcher, args.probes, "one")
        # the steady window with exactly one workflow waiting (the fleet's first)
        await client.start_workflow(
            "SignalApproval", {"timeout_s": 86400}, id="fleet-0", task_queue=TASK_QUEUE
        )
        await watcher.until_seen({"fleet-0"}, timeout=60)
        out["one_waiting"] = {"latency": dist(one), "steady": await window(adapter, args.window)}
        print(f"  {out['one_waiting']}", flush=True)

        print(f"phase 2: starting {args.fleet} waiting workflows", flush=True)
        t0 = time.monotonic()
        started_s = await start_fleet(client, args.fleet, first=1)
        fleet = {f"fleet-{i}" for i in range(args.fleet)}
        settled = await watcher.until_seen(fleet, timeout=args.settle_timeout)
        settle_s = time.monotonic() - t0
        seen = len(fleet & set(watcher.first_seen))
        fleet_lat = [
            (watcher.first_seen[w][0] - watcher.first_seen[w][1]).total_seconds()
            for w in fleet & set(watcher.first_seen)
        ]
        print(f"  started in {started_s:.1f}s; {seen} visible after {settle_s:.1f}s", flush=True)
        many = await probes(client, watcher, args.probes, "many")
        out["fleet_waiting"] = {
            "waiting": args.fleet,
            "start_s": round(started_s, 1),
            "all_visible": settled,
            "visible": seen,
            "settle_s": round(settle_s, 1),
            "fleet_wait_to_visible": dist(fleet_lat),
            "latency": dist(many),
            "steady": await window(adapter, args.window),
        }
        print(f"  {out['fleet_waiting']}", flush=True)
        out["observe_s"] = dist(watcher.observe_s)
        out["native_totals"] = {
            "metadata_queries": adapter.native_waits.stats.metadata_queries,
            "history_reads": adapter.native_waits.stats.history_reads,
        }
        out["observe_errors"] = watcher.errors[:5]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await adapter.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--rps", type=float, default=100.0)
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--settle-timeout", type=float, default=180.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="irq-native-bench-") as tmp:
        server = DevServer(Path(tmp) / "temporal")
        server.start()
        worker = ChildProcess(
            "native-wait-worker",
            [sys.executable, str(WORKER), server.address, TASK_QUEUE],
            Path(tmp) / "worker.log",
            env={"PYTHONPATH": str(ROOT)},
        )
        try:
            worker.start()
            deadline = time.monotonic() + 60
            while "ready" not in (Path(tmp) / "worker.log").read_text(errors="replace"):
                if time.monotonic() > deadline:
                    raise SystemExit("the worker did not start")
                time.sleep(0.1)
            t0 = time.monotonic()
            results = asyncio.run(bench(args, server))
        finally:
            worker.stop()
            server.stop()
    results["config"] = {
        "rps": args.rps,
        "poll_s": args.poll,
        "fleet": args.fleet,
        "probes": args.probes,
        "window_s": args.window,
        "run_s": round(time.monotonic() - t0, 1),
        "machine": "2 cores shared with other test suites; dev server (SQLite) and worker on "
        "the same machine",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(results, indent=2))
    if not args.no_write:
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
