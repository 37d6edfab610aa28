"""A Temporal server that is down, hung or not Temporal: Unreachable, then recovery."""

from __future__ import annotations

import time

import pytest

from backend_adapters.base import MemoryPauseLedger, Unreachable
from backend_adapters.registry import open_backend
from backend_adapters.temporal.adapter import TemporalBackend


async def test_down_and_hung_server_degrade_then_recover(own_temporal_server) -> None:
    server = own_temporal_server
    server.start_workflow("idle-1", "IdleAgent", "no-worker-tq", {})
    # rps=1000: incremental listings are spaced to fit the request budget (0.3 s apart at the
    # default rps=20), and an observe() that sends nothing cannot find the server hung; with
    # this budget every observe() below lists, so each one meets the server
    backend = open_backend(server.backend_url(timeout=1, rps=1000), MemoryPauseLedger())
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    try:
        obs = await backend.observe()
        assert [r.native_id for r in obs.runs] == ["idle-1"]

        # hung: the process is alive and holds its sockets but answers nothing
        server.freeze()
        started = time.monotonic()
        with pytest.raises(Unreachable, match=r"did not answer \w+ within 1s"):
            await backend.observe()  # the URL's 1 s deadline, not the 5 s default
        # bounded (a generous bound for a loaded machine; how fast is a benchmark's figure)
        assert time.monotonic() - started < 30.0
        with pytest.raises(Unreachable):
            await backend.get_run("idle-1")
        server.thaw()
        obs = await backend.observe()
        assert [r.native_id for r in obs.runs] == ["idle-1"]

        # down: connection refused, fast
        server.stop()
        started = time.monotonic()
        with pytest.raises(Unreachable, match="unreachable") as refused:
            await backend.observe()
        assert "did not answer" not in str(refused.value)  # refused at once, not a timeout
        with pytest.raises(Unreachable) as refused:
            await backend.pause("idle-1", reason="x", identity="y")
        assert "did not answer" not in str(refused.value)
        assert time.monotonic() - started < 30.0  # generous: bounded, not a speed claim

        # back (same ports, same database): the same adapter recovers without a restart
        server.start()
        obs = await backend.observe()
        assert [r.native_id for r in obs.runs] == ["idle-1"]
    finally:
        await backend.close()


async def test_not_temporal_is_unreachable(temporal_server) -> None:
    # the server's Prometheus port: a real HTTP server that answers, but not Temporal's API
    url = f"temporal+http://127.0.0.1:{temporal_server.metrics_port}/default?timeout=1"
    backend = open_backend(url, MemoryPauseLedger())
    with pytest.raises(Unreachable, match="not Temporal"):
        await backend.start()
    await backend.close()
