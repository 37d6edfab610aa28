"""DBOS native waits: wait begins -> inbox item visible, at 1 and at 1,000 waiting workflows,
and the polling cost the adapter puts on the system database.

Starts ``tests/adapters/plain_recv_agent.py`` (a plain DBOS agent that imports nothing from
irq: a step, then ``DBOS.recv("approval", timeout_seconds=3600)``) on SQLite in a temporary
directory, and opens the DBOS adapter on its system database as the gateway does. A poll
loop calls ``observe()`` every poll interval (``--polls``: the gateway's default 1 s, then
0.5 s as ``?poll=0.5`` sets it; the next poll starts one interval after the previous one
started, or at once if it overran). An item cannot be seen sooner than the next poll, so the
latency is bounded by the interval plus one poll's time.

For each scale (1, then ``--waiting`` workflows parked in their recv), ``--samples`` times:
enqueue one more workflow, and measure from the moment its wait began (the ``DBOS.sleep``
row its recv journals, in milliseconds) to the end of the first poll that returned its item
of kind ``message``. Each sample is answered afterwards (``respond`` on topic ``approval``),
so the waiting count stays at the scale. Polling cost: SQL statements the adapter's client
issued per second (counted on its SQLAlchemy engine) and the time of one poll.

Writes ``benchmarks/results/native_waits_dbos.json``.
Usage: ``python benchmarks/native_waits_dbos.py [--waiting 1000] [--samples 20] [--polls 1 0.5]``
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dbos import DBOSClient  # noqa: E402
from sqlalchemy import event  # noqa: E402

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.dbos.adapter import DBOSBackend  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from console.model import Decision, DecisionKind, Interrupt, InterruptKind  # noqa: E402
from console.processes import ChildProcess  # noqa: E402

AGENT = ROOT / "tests" / "adapters" / "plain_recv_agent.py"
RESULTS = ROOT / "benchmarks" / "results" / "native_waits_dbos.json"
DBOS_VERSION = importlib.metadata.version("dbos")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 3),
        "p95_s": round(p95(values), 3),
        "max_s": round(max(values), 3),
    }


class Poller:
    """The gateway's poll loop in miniature: observe() every ``interval`` seconds, remembering
    when each message item was first returned."""

    def __init__(self, backend: DBOSBackend, interval: float) -> None:
        self.backend = backend
        self.interval = interval
        self.first_seen: dict[str, float] = {}  # workflow id -> epoch seconds
        self.items: dict[str, Interrupt] = {}
        self.poll_s: list[float] = []
        self.waiting = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            obs = await self.backend.observe()
            now = time.time()
            self.poll_s.append(time.monotonic() - began)
            self.waiting = 0
            for intr in obs.interrupts:
                if intr.kind is not InterruptKind.MESSAGE:
                    continue
                self.waiting += 1
                wid = intr.run_id.rsplit("/", 1)[1]
                self.first_seen.setdefault(wid, now)
                self.items[wid] = intr
            wait = self.interval - (time.monotonic() - began)
            if wait > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), wait)
                except TimeoutError:
                    pass

    def stop(self) -> None:
        self._stop.set()


def enqueue(client: DBOSClient, wid: str) -> None:
    client.enqueue(
        {
            "queue_name": "approvals",
            "workflow_name": "approval_workflow",
            "workflow_id": wid,
            "app_version": "refunds-1",
        },
        wid,
    )


async def until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def sample_scale(
    poller: Poller, client: DBOSClient, scale: int, samples: int, tag: str
) -> list[float]:
    latencies: list[float] = []
    for n in range(samples):
        await asyncio.sleep(random.uniform(0, poller.interval))  # arrive at any poll phase
        wid = f"{tag}-{n}"
        await asyncio.to_thread(enqueue, client, wid)
        await until(lambda w=wid: w in poller.first_seen, 30, f"item of {wid}")
        intr = poller.items[wid]
        latencies.append(poller.first_seen[wid] - intr.created_at.timestamp())
        decision = Decision(kind=DecisionKind.RESPOND, response={"approved": True},
                            topic="approval")
        await poller.backend.decide(intr, decision, idempotency_key=f"bench-{wid}",
                                    identity="bench")
    print(f"  {scale:>5} waiting, poll {poller.interval:g} s: visible median {statistics.median(latencies):.3f} s, "
          f"p95 {p95(latencies):.3f} s (n={len(latencies)})")
    return latencies


async def cost(poller: Poller, counter: dict[str, int], seconds: float) -> dict[str, float]:
    polls_before, started = len(poller.poll_s), time.monotonic()
    counter["n"] = 0
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - started
    polls = poller.poll_s[polls_before:]
    return {
        "queries_per_s": round(counter["n"] / elapsed, 1),
        "queries_per_poll": round(counter["n"] / max(1, len(polls)), 1),
        "poll_median_ms": round(statistics.median(polls) * 1000, 1) if polls else 0.0,
        "poll_p95_ms": round(p95(polls) * 1000, 1) if polls else 0.0,
    }


async def at_scale(
    poller: Poller,
    client: DBOSClient,
    counter: dict[str, int],
    args: argparse.Namespace,
    scale: int,
    tag: str,
) -> dict[str, dict[str, Any]]:
    """Latency and cost at one scale, for each poll interval (the gateway's default 1 s, and
    the shorter interval a ``?poll=`` parameter gives)."""
    out: dict[str, dict[str, Any]] = {}
    for poll in args.polls:
        poller.interval = poll
        latencies = await sample_scale(poller, client, scale, args.samples, f"{tag}-{poll:g}")
        out[f"{poll:g}"] = {**summary(latencies), **await cost(poller, counter, args.cost_s)}
    return out


async def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="irq-bench-native-dbos-") as tmp:
        db = Path(tmp) / "sys.db"
        agent = ChildProcess("plain-recv-agent", [sys.executable, str(AGENT), str(db)],
                             Path(tmp) / "agent.log", env={"PYTHONPATH": str(ROOT)})
        agent.start()
        backend: DBOSBackend | None = None
        client: DBOSClient | None = None
        try:
            log = Path(tmp) / "agent.log"
            await until(lambda: "ready" in log.read_text(errors="replace"), 60, "the agent")
            opened = open_backend(f"dbos+sqlite:///{db}", MemoryPauseLedger())
            assert isinstance(opened, DBOSBackend)
            backend = opened
            await backend.start()
            engine = backend._database.connected()._sys_db.engine  # count the adapter's SQL
            counter = {"n": 0}
            lock = threading.Lock()

            def count(*_: Any) -> None:
                with lock:
                    counter["n"] += 1

            event.listen(engine, "before_cursor_execute", count)
            client = DBOSClient(system_database_url=f"sqlite:///{db}")
            poller = Poller(backend, args.polls[0])
            loop_task = asyncio.create_task(poller.run())
            results: dict[str, Any] = {}
            print(f"DBOS native waits (SQLite, dbos {DBOS_VERSION})")
            results["1"] = await at_scale(poller, client, counter, args, 1, "one")
            fill_began = time.monotonic()
            for n in range(args.waiting):
                await asyncio.to_thread(enqueue, client, f"fill-{n}")
            await until(lambda: poller.waiting >= args.waiting, 180, "the fill to park")
            print(f"  parked {args.waiting} workflows in {time.monotonic() - fill_began:.1f} s")
            results[str(args.waiting)] = await at_scale(
                poller, client, counter, args, args.waiting, "many"
            )
            poller.stop()
            await loop_task
            for scale, by_poll in results.items():
                for poll, figures in by_poll.items():
                    print(f"  {scale:>5} waiting, poll {poll} s: {figures['queries_per_s']} "
                          f"queries/s ({figures['queries_per_poll']} per poll), poll median "
                          f"{figures['poll_median_ms']} ms, p95 {figures['poll_p95_ms']} ms")
            out = {
                "benchmark": "native_waits_dbos",
                "what": "wait begins (the recv's journaled sleep row) -> first poll returning "
                        "the item of kind message; polling cost = SQL statements the "
                        "adapter's client issued",
                "polls_s": args.polls,
                "goal_p95_s": 1.0,
                "dbos": DBOS_VERSION,
                "python": platform.python_version(),
                "database": "sqlite",
                "scales": results,
                "wall_s": round(time.monotonic() - started, 1),
            }
            RESULTS.write_text(json.dumps(out, indent=2) + "\n")
            print(f"wrote {RESULTS.relative_to(ROOT)} ({out['wall_s']} s)")
        finally:
            if backend is not None:
                await backend.close()
            if client is not None:
                client.destroy()
            agent.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--polls", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--cost-s", type=float, default=8.0)
    asyncio.run(main(parser.parse_args()))
