"""The DBOS adapter on the demo fleet: how long one poll takes, and how soon a decision lands.

Starts the demo fleet (``console.demo.dbos.fleet``: real DBOS agents on SQLite, no
preemptions) in a temporary directory, opens the adapter on its system database as the
gateway does (``dbos+sqlite:///PATH``), then:

1. polls ``observe()`` ``--polls`` times back to back and reports the time of one poll;
2. approves up to ``--decisions`` pending interrupts, one at a time, and reports the time from
   the ``decide()`` call to the first poll in which the interrupt is no longer pending (the
   agent woke up, took the decision and moved on; polled every ``--poll`` s). The agents
   listen with ``notification_listener_polling_interval_sec=0.1`` (what the agent helpers set).

Usage: ``python benchmarks/dbos_adapter.py [--agents 10] [--polls 100] [--decisions 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from benchmarks.results_file import spread, write_results  # noqa: E402
from console.model import Decision, DecisionKind, Interrupt  # noqa: E402
from console.processes import ChildProcess  # noqa: E402


def line(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"  {name:44s} median {statistics.median(values) * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms"
        f"  min {ordered[0] * 1000:6.1f}  max {ordered[-1] * 1000:7.1f}  (n={len(values)})"
    )


async def next_interrupt(backend, seen: set[str], timeout_s: float) -> Interrupt | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in (await backend.observe()).interrupts:
            if intr.id not in seen and intr.status == "pending":
                return intr
        await asyncio.sleep(0.2)
    return None


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="irq-bench-dbos-") as tmp:
        db = Path(tmp) / "fleet.sqlite"
        fleet = ChildProcess(
            "fleet",
            [sys.executable, "-m", "console.demo.dbos.fleet", "--db", str(db),
             "--agents", str(args.agents), "--workers", str(args.workers),
             "--preempt-every", "0", "--step-scale", str(args.step_scale)],
            Path(tmp) / "fleet.log",
            env={"PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        fleet.start()
        backend = None
        try:
            deadline = time.monotonic() + 120
            while not db.exists() and time.monotonic() < deadline and fleet.alive():
                await asyncio.sleep(0.2)
            backend = open_backend(f"dbos+sqlite:///{db}", MemoryPauseLedger())
            await backend.start()
            # until the fleet runs (every lane has a run)
            while time.monotonic() < deadline:
                obs = await backend.observe()
                if len([r for r in obs.runs if not r.state.terminal]) >= args.agents:
                    break
                await asyncio.sleep(0.5)
            polls: list[float] = []
            runs_seen = 0
            for _ in range(args.polls):
                t = time.perf_counter()
                obs = await backend.observe()
                polls.append(time.perf_counter() - t)
                runs_seen = max(runs_seen, len(obs.runs))

            wake: list[float] = []
            seen: set[str] = set()
            for n in range(args.decisions):
                intr = await next_interrupt(backend, seen, timeout_s=90)
                if intr is None:
                    print(f"  (only {n} interrupts were raised in time)", file=sys.stderr)
                    break
                seen.add(intr.id)
                kind = DecisionKind.APPROVE
                if kind not in intr.allowed_decisions:
                    kind = DecisionKind.REJECT
                decision = (
                    Decision(kind=kind)
                    if kind is DecisionKind.APPROVE
                    else Decision(kind=kind, feedback="benchmark")
                )
                t = time.perf_counter()
                await backend.decide(intr, decision, idempotency_key=f"bench-{n}", identity="bench")
                while time.perf_counter() - t < 60:
                    pending = {i.id for i in (await backend.observe()).interrupts}
                    if intr.id not in pending:
                        wake.append(time.perf_counter() - t)
                        break
                    await asyncio.sleep(args.poll)
        finally:
            if backend is not None:
                await backend.close()
            fleet.stop()
    print(
        f"DBOS demo fleet on SQLite: {args.agents} agents on {args.workers} workers, "
        f"{runs_seen} runs reported per poll"
    )
    print(line("observe() (one poll)", polls))
    if wake:
        print(line(f"decide() -> no longer pending (poll {args.poll:g}s)", wake))
    write_results("dbos_adapter", {
        "agents": args.agents, "workers": args.workers, "runs_per_poll": runs_seen,
        "agent_listener_poll_s": 0.1, "decision_poll_s": args.poll,
        "observe_ms": spread(polls), "decide_to_not_pending_ms": spread(wake),
    })


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--step-scale", type=float, default=0.2)
    parser.add_argument("--polls", type=int, default=100)
    parser.add_argument("--decisions", type=int, default=8)
    parser.add_argument("--poll", type=float, default=0.02)
    asyncio.run(main(parser.parse_args()))
