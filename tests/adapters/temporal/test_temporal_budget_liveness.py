"""A SIGKILLed worker's runs turn lost whatever the poll interval and request budget (real
server, real worker): the listing must not eat the budget the describes need, and an adapter
opened after the server's timeout must see it too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporal_scenarios import HEARTBEAT_TIMEOUT_S, train_params, wait_run

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.temporal.adapter import TemporalBackend
from backend_adapters.temporal.dev_server import DevServer
from console.model import RunState
from devtools.temporal_sample_worker import WorkerProcess

FAST_POLL_S = 0.1
SMALL_RPS = 20.0  # the default budget: three listing calls per 0.1 s poll would need 30/s


async def _open(server: DevServer, task_queue: str, **params: object) -> TemporalBackend:
    backend = open_backend(
        server.backend_url(query=f"TaskQueue='{task_queue}'", timeout=5, **params),
        MemoryPauseLedger(),
    )
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    return backend


@pytest.fixture
async def fast_small_adapter(
    temporal_server: DevServer, task_queue: str
) -> AsyncIterator[TemporalBackend]:
    backend = await _open(temporal_server, task_queue, poll=FAST_POLL_S, rps=SMALL_RPS)
    yield backend
    await backend.close()


async def test_fast_poll_small_budget_still_turns_killed_run_lost(
    fast_small_adapter: TemporalBackend,
    temporal_server: DevServer,
    start_worker: Callable[..., WorkerProcess],
    task_queue: str,
    tmp_path: Path,
) -> None:
    adapter = fast_small_adapter
    worker = start_worker()
    wids = ("budget-retry", "budget-once")
    temporal_server.start_workflow(wids[0], "TrainAgent", task_queue, train_params(tmp_path, "b1"))
    temporal_server.start_workflow(
        wids[1], "TrainAgent", task_queue, train_params(tmp_path, "b2", maximum_attempts=1)
    )
    adapter.focus(set(wids))
    last_hb: dict[str, datetime] = {}
    for wid in wids:
        run = await wait_run(adapter, wid, lambda r: r.heartbeat_at is not None and r.progress)
        assert run.heartbeat_at is not None
        last_hb[wid] = run.heartbeat_at
    worker.kill()
    killed_at = datetime.now(UTC)

    lost_after: dict[str, float] = {}
    deadline = time.monotonic() + HEARTBEAT_TIMEOUT_S + 60.0  # ends as soon as both are lost
    while time.monotonic() < deadline and len(lost_after) < len(wids):
        started = time.monotonic()
        obs = await adapter.observe()
        now = datetime.now(UTC)
        for run in obs.runs:
            if run.native_id in wids and run.state is RunState.LOST:
                lost_after.setdefault(run.native_id, (now - killed_at).total_seconds())
        await asyncio.sleep(max(0.0, FAST_POLL_S - (time.monotonic() - started)))

    for wid in wids:
        assert wid in lost_after, f"{wid} never turned lost at poll {FAST_POLL_S}s rps {SMALL_RPS}"
        # lost within a generous bound of the heartbeat deadline (how soon on an idle machine
        # is a figure for benchmarks/temporal_dead_worker.py, not a test)
        hb_gap = (killed_at - last_hb[wid]).total_seconds()
        assert lost_after[wid] <= HEARTBEAT_TIMEOUT_S - hb_gap + 20.0, (wid, lost_after)


async def test_adapter_opened_after_the_timeout_shows_run_without_retry_lost(
    adapter: TemporalBackend,
    temporal_server: DevServer,
    start_worker: Callable[..., WorkerProcess],
    task_queue: str,
    tmp_path: Path,
) -> None:
    worker = start_worker()
    temporal_server.start_workflow(
        "late-open-once", "TrainAgent", task_queue, train_params(tmp_path, "o1", maximum_attempts=1)
    )
    adapter.focus({"late-open-once"})
    await wait_run(adapter, "late-open-once", lambda r: r.heartbeat_at is not None and r.progress)
    worker.kill()
    # the server times the activity out (no retry left); the adapter that watched it says lost
    await wait_run(
        adapter,
        "late-open-once",
        lambda r: r.state is RunState.LOST,
        timeout=HEARTBEAT_TIMEOUT_S + 30.0,
    )
    # a newly opened adapter never saw the activity: its first describe has no pending
    # activity, only a workflow task no worker takes; it must read history, not say running
    fresh = await _open(temporal_server, task_queue)
    try:
        run = await wait_run(fresh, "late-open-once", lambda r: r.state is not RunState.RUNNING)
        assert run.state is RunState.LOST, run.contract()
        assert run.details["lost"]["by"] == "server"
    finally:
        await fresh.close()
