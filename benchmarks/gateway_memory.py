"""The gateway's memory per run, by tracemalloc: where the bytes of an index of N runs go.

Builds a hub, indexes N synthetic runs as benchmarks/gateway_scale.py's synthetic backend
reports them, pushes three rounds of beats through ``agent_heartbeat`` and
``flush_heartbeats`` (frames of 100, as the agents of gateway_scale.py send them), encodes the
log's events compactly (as subscribed clients with compact beats read them), and prints the
bytes held per run after indexing and after the beats, with the lines that allocated most.
The real process's RSS (interpreter, fragmentation) is gateway_scale.py's to measure.

    .venv/bin/python benchmarks/gateway_memory.py [N]   # default 100000
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.gateway.event_log import Event  # noqa: E402
from console.gateway.hub import Hub, Reporter  # noqa: E402
from console.gateway.protocol import AgentHeartbeat  # noqa: E402
from console.model import Run  # noqa: E402

TOP_LINES = 12


def held_kib(now: tracemalloc.Snapshot, before: tracemalloc.Snapshot, n: int) -> float:
    return sum(s.size_diff for s in now.compare_to(before, "filename")) / n / 1024


def show(now: tracemalloc.Snapshot, before: tracemalloc.Snapshot) -> None:
    for stat in now.compare_to(before, "lineno")[:TOP_LINES]:
        print("   ", stat)


def main(n: int) -> None:
    tracemalloc.start(1)
    hub = Hub()
    gc.collect()
    start = tracemalloc.take_snapshot()
    now = datetime.now(UTC)
    runs = [Run(id=f"bench:local/run-{i:06d}", backend="bench", context="local",
                native_id=f"run-{i:06d}", name="synthetic", started_at=now)
            for i in range(n)]
    hub.observe_runs(runs)
    del runs
    gc.collect()
    indexed = tracemalloc.take_snapshot()
    print(f"indexed: {held_kib(indexed, start, n):.2f} KiB/run")
    show(indexed, start)
    agent = Reporter("bench-agent", "bench-agent")
    for k in range(3):
        for i in range(n):
            if i % 100 == 0:  # a frame of 100 beats: one time for all (as agent_channel.py)
                at = now = datetime.now(UTC)
            beat = AgentHeartbeat.model_construct(
                backend="bench", context="local", native_id=f"run-{i:06d}", seq=k * n + i + 1,
                at=at, progress=(i % 100) / 100, interval_s=5.0, timeout_s=12.0,
                resources=None, in_flight_step=None, phase="running", details={})
            hub.agent_heartbeat(f"bench:local/run-{i:06d}", beat, agent, 120, now)
            if i % 100 == 99:
                hub.flush_heartbeats()
        hub.flush_heartbeats()
    for event in list(hub.log):
        if isinstance(event, Event):
            event.compact()
    gc.collect()
    beaten = tracemalloc.take_snapshot()
    print(f"after beats: {held_kib(beaten, start, n):.2f} KiB/run "
          f"({len(hub.log)} events in the log)")
    show(beaten, indexed)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
