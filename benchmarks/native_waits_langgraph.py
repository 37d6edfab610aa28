"""LangGraph native waits: wait begins -> inbox item visible, at 1 and at N waiting threads,
and the requests/s irq's adapter puts on the Agent Server meanwhile.

Starts a real ``langgraph dev`` (in-memory runtime) on the test graphs that import nothing
from irq: ``breakpoint_agent`` (``compile(interrupt_before=["tools"])``) and ``hitl_agent``
(``create_agent`` + ``HumanInTheLoopMiddleware``; each thread asks about three tool calls in
one interrupt). irq's adapter polls as the gateway does (``observe()`` every ``--poll`` s).

A sample starts one thread (at a random point of the poll cycle) and times from the moment its wait began (the item's
``created_at``: the breakpoint's checkpoint, the interrupt's ``state_updated_at``, both the
server's clock on this host) to the first poll whose observation holds the item. Phase "at 1"
ends each sampled thread before the next; then the server is filled with waiting threads
(half of each kind) for up to ``--fill-s`` seconds or ``--threads`` threads, and the samples
are repeated on top (after the adapter has seen every filled thread once: how long that
first sight of a burst takes is reported too). Requests/s counts every HTTP request the adapter sent over each phase,
and over a quiet window at N (nothing changes: the steady polling cost).

Usage: ``python benchmarks/native_waits_langgraph.py [--threads 1000] [--fill-s 180]``;
writes ``benchmarks/results/native_waits_langgraph.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.langgraph.adapter import LangGraphBackend  # noqa: E402
from backend_adapters.langgraph.dev_server import AgentServer, write_config  # noqa: E402
from backend_adapters.langgraph.http_api import AgentServerHttp  # noqa: E402

GRAPHS_DIR = ROOT / "tests" / "adapters" / "langgraph" / "graphs"
GRAPHS = {
    "breakpoint": "./breakpoint_graph.py:graph",
    "middleware": "./hitl_agent_graph.py:graph",
}
RESULTS = ROOT / "benchmarks" / "results" / "native_waits_langgraph.json"
EMAIL = {"name": "send_email", "args": {"to": "a@example.com", "body": "hi"}}
CALLS = {
    "breakpoint": [EMAIL],
    "middleware": [
        EMAIL,
        {"name": "delete_file", "args": {"path": "r.txt"}},
        {"name": "send_email", "args": {"to": "b@example.com", "body": "yo"}},
    ],
}


def script(kind: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": json.dumps({"calls": CALLS[kind]})}]}


class Poller:
    """``observe()`` every ``poll_s``, recording when each item was first seen."""

    def __init__(self, adapter: LangGraphBackend, poll_s: float) -> None:
        self.adapter = adapter
        self.poll_s = poll_s
        self.seen: dict[str, tuple[datetime, datetime, str]] = {}  # run id -> seen, began, kind
        self.observe_s: list[float] = []
        self.last_count = 0  # items in the latest observation
        self.polls = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            observation = await self.adapter.observe()
            now = datetime.now(UTC)
            self.observe_s.append(time.monotonic() - t0)
            for item in observation.interrupts:
                self.seen.setdefault(item.run_id, (now, item.created_at, item.kind.value))
            self.last_count = len(observation.interrupts)
            self.polls += 1
            try:
                await asyncio.wait_for(
                    self._stop.wait(), max(0.0, self.poll_s - (time.monotonic() - t0))
                )
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stop.set()


async def start_thread(http: httpx.AsyncClient, kind: str, tag: str) -> str:
    tid = str((await http.post("/threads", json={"metadata": {"bench": tag}})).json()["thread_id"])
    r = await http.post(f"/threads/{tid}/runs", json={"assistant_id": kind, "input": script(kind)})
    r.raise_for_status()
    return tid


async def sample(
    http: httpx.AsyncClient, poller: Poller, kind: str, *, end_after: bool
) -> tuple[float, str]:
    """Seconds from the wait's start to the first poll that shows the item; the kind seen.
    Each sample starts at a random point of the poll cycle (else every sample would start
    right after the poll that saw the previous one, always at the same phase)."""
    await asyncio.sleep(random.uniform(0, poller.poll_s))
    tid = await start_thread(http, kind, "sample")
    run_id = f"langgraph:local/{tid}"
    deadline = time.monotonic() + 120
    while run_id not in poller.seen:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{kind} thread {tid} never became visible")
        await asyncio.sleep(0.02)
    seen, began, seen_kind = poller.seen[run_id]
    if end_after:  # keep "at 1" at one waiting thread: resolve it without running anything
        await http.post(f"/threads/{tid}/state", json={"values": None, "as_node": "__end__"})
    return (seen - began).total_seconds(), seen_kind


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


async def phase(
    http: httpx.AsyncClient,
    poller: Poller,
    adapter_http: AgentServerHttp,
    samples: int,
    *,
    end_after: bool,
) -> dict[str, Any]:
    requests0, t0 = adapter_http.requests, time.monotonic()
    out: dict[str, Any] = {}
    for kind in ("breakpoint", "middleware"):
        latencies = []
        for _ in range(samples):
            seconds, seen_kind = await sample(http, poller, kind, end_after=end_after)
            assert seen_kind == kind, (seen_kind, kind)
            latencies.append(seconds)
        out[kind] = {
            "n": len(latencies),
            "p50_s": round(statistics.median(latencies), 3),
            "p95_s": round(p95(latencies), 3),
            "max_s": round(max(latencies), 3),
        }
    elapsed = time.monotonic() - t0
    out["requests_per_s"] = round((adapter_http.requests - requests0) / elapsed, 1)
    return out


async def fill(http: httpx.AsyncClient, target: int, budget_s: float) -> tuple[int, float]:
    """Start up to ``target`` waiting threads (half of each kind) within ``budget_s``; the
    number that reached their wait, and the seconds it took."""
    t0 = time.monotonic()
    gate = asyncio.Semaphore(32)
    started = 0

    async def one(i: int) -> None:
        nonlocal started
        async with gate:
            if time.monotonic() - t0 > budget_s * 0.6:
                return  # leave time for the queue to drain within the budget
            await start_thread(http, "breakpoint" if i % 2 == 0 else "middleware", "fill")
            started += 1

    await asyncio.gather(*(one(i) for i in range(target)))
    while True:
        count = int((await http.post("/threads/count", json={"status": "interrupted"})).json())
        if count >= started or time.monotonic() - t0 > budget_s * 2:
            return count, time.monotonic() - t0
        await asyncio.sleep(1.0)


async def caught_up(poller: Poller, waiting: int) -> float:
    """Seconds until a poll shows every waiting thread's item (the adapter reads each new
    breakpoint's state and last run once), then one more poll so the next starts cached."""
    t0 = time.monotonic()
    while poller.last_count < waiting:
        await asyncio.sleep(0.1)
    elapsed = time.monotonic() - t0
    polls = poller.polls
    while poller.polls < polls + 2:
        await asyncio.sleep(0.1)
    return elapsed


async def quiet_rate(adapter_http: AgentServerHttp, seconds: float) -> float:
    requests0, t0 = adapter_http.requests, time.monotonic()
    await asyncio.sleep(seconds)
    return round((adapter_http.requests - requests0) / (time.monotonic() - t0), 2)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="irq-lg-native-") as tmp:
        workdir = Path(tmp)
        for source in GRAPHS_DIR.glob("*.py"):
            shutil.copy(source, workdir / source.name)
        write_config(workdir, GRAPHS)
        server = AgentServer(workdir, jobs_per_worker=args.jobs)
        server.start()
        adapter_http = AgentServerHttp(server.url, timeout_s=60)
        adapter = LangGraphBackend(adapter_http, MemoryPauseLedger(), poll_interval_s=args.poll)
        await adapter.start()
        poller = Poller(adapter, args.poll)
        polling = asyncio.create_task(poller.run())
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
                at_1 = await phase(http, poller, adapter_http, args.samples, end_after=True)
                print(f"at 1 waiting thread: {at_1}", flush=True)
                waiting, fill_s = await fill(http, args.threads, args.fill_s)
                print(f"{waiting} waiting threads in {fill_s:.0f} s", flush=True)
                catch_up_s = await caught_up(poller, waiting)
                print(f"all {waiting} items visible {catch_up_s:.1f} s after the fill", flush=True)
                poller.observe_s.clear()
                steady = await quiet_rate(adapter_http, args.quiet_s)
                observe_at_n = statistics.median(poller.observe_s) if poller.observe_s else 0.0
                at_n = await phase(http, poller, adapter_http, args.samples, end_after=False)
                print(f"at {waiting} waiting threads: {at_n}", flush=True)
        finally:
            poller.stop()
            await polling
            await adapter.close()
            server.stop()
    return {
        "benchmark": "native_waits_langgraph",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"python": platform.python_version(), "cpus": _cpus()},
        "server": "langgraph dev (in-memory runtime), --n-jobs-per-worker " + str(args.jobs),
        "poll_s": args.poll,
        "samples_per_kind": args.samples,
        "at_1": at_1,
        "waiting_threads": waiting,
        "fill_target": args.threads,
        "fill_s": round(fill_s, 1),
        "first_sight_of_all_s": round(catch_up_s, 1),
        "at_n": at_n,
        "observe_s_median_at_n": round(observe_at_n, 3),
        "steady_requests_per_s_at_n": steady,
    }


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--fill-s", type=float, default=180.0)
    parser.add_argument("--samples", type=int, default=20, help="per kind and phase")
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--quiet-s", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=16, help="--n-jobs-per-worker")
    result = asyncio.run(main(parser.parse_args()))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {RESULTS.relative_to(ROOT)}")
