"""The LangGraph test scenarios' plumbing: starting a real Agent Server on the test graphs,
and a client of the server's own API (tests check what reached the graph in the thread's
state, not through irq)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from backend_adapters.langgraph.dev_server import AgentServer, write_config

GRAPHS_DIR = Path(__file__).parent / "graphs"
GRAPHS = {
    "inbox": "./inbox_graph.py:graph",
    "hitl_agent": "./hitl_agent_graph.py:graph",
    "breakpoint_agent": "./breakpoint_graph.py:graph",
    "breakpoint_after": "./breakpoint_graph.py:graph_after",
    "breakpoint_plain": "./breakpoint_graph.py:plain",
    "any_value": "./any_value_graph.py:graph",
    "picky": "./any_value_graph.py:picky",
    "two_interrupts": "./two_interrupts_graph.py:graph",
    "slow": "./slow_graph.py:graph",
    "flaky": "./flaky_graph.py:graph",
    "helper_ask": "./helper_graphs.py:helper_ask",
    "helper_review": "./helper_graphs.py:helper_review",
    "helper_work": "./helper_graphs.py:helper_work",
}


def prepare_server_dir(workdir: Path) -> Path:
    """Copy the test graphs next to a langgraph.json naming them."""
    workdir.mkdir(parents=True, exist_ok=True)
    for source in GRAPHS_DIR.glob("*.py"):
        shutil.copy(source, workdir / source.name)
    write_config(workdir, GRAPHS)
    return workdir


def start_agent_server(
    workdir: Path, port: int | None = None, env: dict[str, str] | None = None
) -> AgentServer:
    server = AgentServer(prepare_server_dir(workdir), extra_env=dict(env or {}))
    if port is not None:
        server.port, server.ports_fixed = port, True
    server.start()
    return server


class ServerClient:
    """The Agent Server's own API, for arranging scenarios and checking what the graph got."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30)

    def _json(self, r: httpx.Response) -> Any:
        assert r.status_code < 400, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
        return r.json() if r.content else None

    def new_thread(self, **metadata: Any) -> str:
        return str(self._json(self.http.post("/threads", json={"metadata": metadata}))["thread_id"])

    def start(self, graph: str, input: dict[str, Any], thread_id: str | None = None) -> str:
        """Start a background run of ``graph`` on a new thread; the thread id."""
        tid = thread_id or self.new_thread(case="irq-test")
        self._json(self.http.post(f"/threads/{tid}/runs", json={"assistant_id": graph,
                                                                 "input": input}))
        return tid

    def run_until_interrupted(self, graph: str, input: dict[str, Any]) -> str:
        tid = self.new_thread(case="irq-test")
        self._json(self.http.post(f"/threads/{tid}/runs/wait",
                                  json={"assistant_id": graph, "input": input}))
        assert self.thread(tid)["status"] == "interrupted", self.thread(tid)
        return tid

    def thread(self, tid: str) -> dict[str, Any]:
        return dict(self._json(self.http.get(f"/threads/{tid}")))

    def state(self, tid: str) -> dict[str, Any]:
        return dict(self._json(self.http.get(f"/threads/{tid}/state")))

    def runs(self, tid: str) -> list[dict[str, Any]]:
        return list(self._json(self.http.get(f"/threads/{tid}/runs")))

    def interrupt_ids(self, tid: str) -> list[str]:
        raw = self.thread(tid).get("interrupts") or {}
        return [i["id"] for items in raw.values() for i in items]

    def wait_status(self, tid: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
        """The thread once its status is one of ``statuses`` (and no run is queued on it)."""
        deadline = time.monotonic() + timeout
        thread: dict[str, Any] = {}
        while time.monotonic() < deadline:
            thread = self.thread(tid)
            active = [r for r in self.runs(tid) if r["status"] in ("pending", "running")]
            if thread["status"] in statuses and not active:
                return thread
            time.sleep(0.1)
        raise AssertionError(f"thread {tid} never reached {statuses}: {thread}")

    def close(self) -> None:
        self.http.close()


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
