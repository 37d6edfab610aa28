"""The alert evaluator's condition sources at N beating runs, in process: one tick as the
gateway runs it (the run-walking sources read the groups and progress marks its run store
keeps as runs change, console/alert_sources/run_groups.py), one walk of the index shared by
the sources (what the gateway did before, ``group_runs``), and each source walking every run
itself (before that); each source is the same pure function every way.

A fleet of N runs is indexed and beaten once (every run reports progress and a GPU, 1 % have
given up, 1 % are backing off, 1 % are paused, 1 % ended holding their GPU), then each way
is timed over ``--repeat`` ticks; the sources' findings must be identical both ways.

    .venv/bin/python benchmarks/alert_tick.py [--runs 100000] [--repeat 5]

Prints a table and writes ``benchmarks/results/alert_tick.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import write_results  # noqa: E402

from console.alert_model import Condition  # noqa: E402
from console.alert_sources.given_up import given_up  # noqa: E402
from console.alert_sources.retrying import retrying  # noqa: E402
from console.alert_sources.run_groups import group_runs  # noqa: E402
from console.alert_sources.stalled import ProgressMarks, stalled  # noqa: E402
from console.gateway.gateway_conditions import GatewayConditions  # noqa: E402
from console.gateway.hub import Hub, Reporter  # noqa: E402
from console.gateway.journal_engines import open_journal  # noqa: E402
from console.gateway.obligation_store import ObligationStore  # noqa: E402
from console.gateway.protocol import AgentHeartbeat  # noqa: E402
from console.leak_conditions import held_too_long, leak_suspected  # noqa: E402
from console.model import Resource, Run, RunState  # noqa: E402
from console.run_facts import StepRetry  # noqa: E402


def fleet(n: int, now: datetime) -> list[Run]:
    runs = []
    for i in range(n):
        fields: dict[str, Any] = {"resources": [Resource(id=f"gpu-{i}", kind="gpu")]}
        if i % 100 == 1:
            fields["state"] = RunState.GIVEN_UP
        elif i % 100 == 2:
            fields.update(state=RunState.BACKING_OFF,
                          retrying=StepRetry(step="fetch", attempt=4, last_error="503"))
        elif i % 100 == 3:
            fields["state"] = RunState.PAUSED
        elif i % 100 == 4:
            fields["state"] = RunState.COMPLETED
        runs.append(Run(id=f"bench:local/run-{i:06d}", backend="bench", context="local",
                        native_id=f"run-{i:06d}", name="synthetic", started_at=now, **fields))
    return runs


def beat(hub: Hub, n: int) -> None:
    agent = Reporter("bench-agent", "bench-agent")
    at = datetime.now(UTC)
    for i in range(n):
        if i % 100 == 0:  # a frame of 100 beats shares one time
            at = datetime.now(UTC)
        hub.agent_heartbeat(f"bench:local/run-{i:06d}", AgentHeartbeat.model_construct(
            backend="bench", context="local", native_id=f"run-{i:06d}", seq=1, at=at,
            progress=(i % 100) / 100, interval_s=5.0, timeout_s=12.0, resources=None,
            in_flight_step=None, phase="running", details={}), agent, 120, at)
        if i % 100 == 99:
            hub.flush_heartbeats()
    hub.flush_heartbeats()


def walk_each(hub: Hub, marks: ProgressMarks) -> list[Condition]:
    """Every run-walking source over every run (the gateway before run_groups.py)."""
    now = hub.clock()
    found: list[Condition] = []
    found += given_up(list(hub.runs.values()))
    found += retrying(list(hub.runs.values()), after=3)
    runs = list(hub.runs.values())
    marks.note(runs, now)
    found += stalled(runs, marks, now, after_s=600)
    found += leak_suspected(list(hub.runs.values()), now)
    paused = [r for r in list(hub.runs.values()) if r.state is RunState.PAUSED]
    found += held_too_long(paused, {}, now)
    return found


def shared_walk(hub: Hub, marks: ProgressMarks) -> list[Condition]:
    """The run-walking sources over one walk of every run (``group_runs``)."""
    now = hub.clock()
    runs = list(hub.runs.values())
    groups = group_runs(runs)
    marks.note(runs, now)
    found = given_up(groups.given_up) + retrying(groups.retrying, after=3)
    found += stalled(hub.runs, marks, now, after_s=600)
    found += leak_suspected(groups.leak_candidates, now)
    return found + held_too_long(groups.paused, {}, now)


def kept_groups(conditions: GatewayConditions) -> list[Condition]:
    """The same sources as the gateway's evaluator calls them: the kept groups."""
    found: list[Condition] = []
    with conditions.one_walk():
        for source in (conditions.given_up, conditions.retrying, conditions.stalled,
                       conditions.leak_suspected, conditions.held_too_long):
            found += source()
    return found


def timed(tick: Callable[[], Iterable[Condition]], repeat: int
          ) -> tuple[list[float], list[Condition]]:
    seconds, found = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        found = list(tick())
        seconds.append(time.perf_counter() - started)
    return seconds, found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    now = datetime.now(UTC)
    hub = Hub()
    hub.observe_runs(fleet(args.runs, now))
    beat(hub, args.runs)
    journal = open_journal(Path(tempfile.mkdtemp(prefix="irq-bench-alerts-")) / "j.db")
    try:
        conditions = GatewayConditions(hub, ObligationStore(journal), {}, {},
                                       retrying_after=3, stalled_after_s=600, started_at=now)
        marks = ProgressMarks()
        each_s, each_found = timed(lambda: walk_each(hub, marks), args.repeat)
        walk_s, walk_found = timed(lambda: shared_walk(hub, ProgressMarks()), args.repeat)
        kept_s, kept_found = timed(lambda: kept_groups(conditions), args.repeat)
    finally:
        journal.close()
    keys = sorted(c.key for c in each_found)
    if keys != sorted(c.key for c in walk_found) or keys != sorted(c.key for c in kept_found):
        raise SystemExit("the ways found different conditions")
    each_ms, walk_ms, kept_ms = (statistics.median(s) * 1000 for s in (each_s, walk_s, kept_s))
    print(f"alert sources over {args.runs:,} runs ({len(keys):,} conditions found), median "
          f"of {args.repeat} ticks:")
    print(f"  every source walks the index     {each_ms:7.1f} ms")
    print(f"  one walk per tick                {walk_ms:7.1f} ms")
    print(f"  kept groups (the gateway)        {kept_ms:7.1f} ms  ({walk_ms / kept_ms:.0f}x less "
          f"than one walk)")
    write_results("alert_tick", {
        "runs": args.runs, "conditions": len(keys), "repeat": args.repeat,
        "every_source_walks_ms": round(each_ms, 1), "one_walk_ms": round(walk_ms, 1),
        "kept_groups_ms": round(kept_ms, 2),
        "every_source_walks_all_ms": [round(s * 1000, 1) for s in each_s],
        "one_walk_all_ms": [round(s * 1000, 1) for s in walk_s],
        "kept_groups_all_ms": [round(s * 1000, 2) for s in kept_s],
    })


if __name__ == "__main__":
    main()
