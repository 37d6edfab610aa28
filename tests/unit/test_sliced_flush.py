"""The beats' flush in slices (Hub.flush_heartbeats_sliced): every run beaten before it began
gets its event once, the event loop runs between slices, and a beat that arrives meanwhile
waits for the next flush (one event per run per window)."""

from __future__ import annotations

import asyncio
from collections import Counter

from console.gateway.hub import Hub
from console.gateway.protocol import AgentHeartbeat
from console.model import Run

RUNS = [Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local", native_id=f"wf-{i}")
        for i in range(1000)]


def beat(hub: Hub, run: Run, seq: int) -> None:
    hub.agent_heartbeat(run.id, AgentHeartbeat(
        type="heartbeat", backend="dbos", native_id=run.native_id, seq=seq, interval_s=5.0,
        progress=seq / 100))


def test_each_run_beaten_before_the_flush_gets_one_event_and_the_loop_runs_between() -> None:
    hub = Hub()
    hub.observe_runs(RUNS)
    for run in RUNS:
        beat(hub, run, 1)
    hub.flush_heartbeats()
    start = hub.seq
    for run in RUNS:
        beat(hub, run, 2)
    turns = []

    async def go() -> None:
        async def other() -> None:  # what else the loop has to do meanwhile
            for _ in range(10):
                turns.append(hub.seq - start)
                beat(hub, RUNS[0], 3 + len(turns))
                await asyncio.sleep(0)

        await asyncio.gather(hub.flush_heartbeats_sliced(size=300), other())

    asyncio.run(go())
    events = list(hub.log)[-(hub.seq - start):]
    per_run = Counter(e["data"]["id"] for e in events)
    assert len(per_run) == 1000 and set(per_run.values()) == {1}
    assert 0 < turns[1] < 1000  # the other task ran between slices
    assert list(hub.beats.dirty) == [RUNS[0].id]  # its later beats: the next flush
