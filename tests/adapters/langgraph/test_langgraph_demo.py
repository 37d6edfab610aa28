"""The LangGraph part of ``irq demo``: its graphs served by a real Agent Server, its feeder.

The ``status-update`` lane's graph stops at a static breakpoint (``interrupt_before``, no
irq code): irq lists it as a ``breakpoint`` wait, an edit changes the draft before it is
published, the feeder keeps the lane's thread while it waits and starts the next one after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.langgraph.adapter import LangGraphBackend
from backend_adapters.langgraph.dev_server import AgentServer, write_config
from backend_adapters.registry import open_backend
from console.demo.langgraph.fleet import GRAPHS, GRAPHS_FILE, LANE_KEY, feed
from console.model import Decision, DecisionKind, InterruptKind, RunState


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    workdir = tmp_path_factory.mktemp("langgraph-demo")
    write_config(workdir, {name: f"{GRAPHS_FILE}:{name}" for name in GRAPHS})
    server = AgentServer(workdir)
    server.start()
    yield server
    server.stop()


def lane_threads(url: str, lane: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=10) as http:
        found = http.post("/threads/search", json={"metadata": {LANE_KEY: lane},
                                                   "limit": 100}).json()
    return sorted(found, key=lambda t: str(t["created_at"]))


async def test_the_status_update_lane_waits_at_its_breakpoint_and_is_answered(
    demo_server: AgentServer, waiter: Any
) -> None:
    feed(demo_server.url, once=True)
    backend = open_backend(demo_server.backend_url(verify_s=10), MemoryPauseLedger())
    assert isinstance(backend, LangGraphBackend)
    await backend.start()
    try:
        async def at_breakpoint() -> Any:
            threads = lane_threads(demo_server.url, "status-update")
            if not threads:
                return None
            tid = threads[-1]["thread_id"]
            observation = await backend.observe()
            return next((i for i in observation.interrupts
                         if i.run_id.endswith(tid) and i.kind is InterruptKind.BREAKPOINT), None)

        item = await waiter(at_breakpoint, timeout_s=20)
        assert "publish" in item.title
        # the feeder keeps a thread that waits at its breakpoint: no second one meanwhile
        feed(demo_server.url, once=True)
        assert len(lane_threads(demo_server.url, "status-update")) == 1

        draft = dict(item.args["draft"])
        draft["audience"] = "customers in eu-west-1"
        await backend.decide(item, Decision(kind=DecisionKind.EDIT, args={"draft": draft}),
                             idempotency_key="demo-edit-1", identity="alice")

        async def published() -> Any:
            [thread] = lane_threads(demo_server.url, "status-update")
            return thread if thread["status"] == "idle" else None

        thread = await waiter(published, timeout_s=20)
        assert thread["values"]["published"] == (
            "status page: Degraded checkout in eu-west-1 (customers in eu-west-1)")
        run = await backend.get_run(thread["thread_id"])
        assert run.state is RunState.COMPLETED
        feed(demo_server.url, once=True)  # the lane is free: the next thread starts
        assert len(lane_threads(demo_server.url, "status-update")) == 2
        await waiter(at_breakpoint, timeout_s=20)
    finally:
        await backend.close()

