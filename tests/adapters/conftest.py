"""DBOS fixtures: real DBOS agents (console.demo.dbos.worker) on SQLite in a temporary directory.

A module-scoped worker process serves its own queue; tests enqueue small plans for the demo
agent workflow with a DBOSClient and watch them through the real adapter. A websockets server
stands in for the gateway's agent channel and records every heartbeat frame the agents push.
Nothing of DBOS is mocked. Processes are stopped by their own pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from console.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]
AGENT_TOKEN = "test-agent-token"


# ----------------------------------------------------------------------- agent channel


class AgentChannelRecorder:
    """A websockets server that records what agents push (hello, heartbeats, headers)."""

    def __init__(self) -> None:
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.server import ServerConnection, serve

        self.frames: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()

        def handler(ws: ServerConnection) -> None:
            self.authorizations.append(ws.request.headers.get("Authorization"))
            try:
                for raw in ws:
                    with self._lock:
                        self.frames.append(json.loads(raw))
            except ConnectionClosed:
                pass  # agents are SIGKILLed in these tests

        self._server = serve(handler, "127.0.0.1", 0)
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agent"

    def beats(self, native_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                f
                for f in self.frames
                if f.get("type") == "heartbeat" and f.get("native_id") == native_id
            ]

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


@pytest.fixture(scope="module")
def agent_channel() -> Iterator[AgentChannelRecorder]:
    recorder = AgentChannelRecorder()
    try:
        yield recorder
    finally:
        recorder.close()


# ------------------------------------------------------------------------------ workers


@dataclass
class DBOSWorker:
    """One ``console.demo.dbos.worker`` process (an executor serving its own queue)."""

    root: Path
    executor_id: str
    queue: str
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    output: Path = field(init=False)

    def __post_init__(self) -> None:
        self.output = self.root / f"{self.executor_id}.out"

    @property
    def db(self) -> Path:
        return self.root / "sys.db"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.db}"

    @property
    def log(self) -> Path:
        return self.root / "exec.jsonl"

    @property
    def board(self) -> Path:
        return self.root / "board"

    def start(self, timeout_s: float = 30.0) -> None:
        cmd = [
            sys.executable, "-m", "console.demo.dbos.worker",
            "--db", str(self.db), "--executor-id", self.executor_id,
            "--queue", self.queue, "--queue-poll", "0.2",
            "--board", str(self.board), "--log", str(self.log), "--watch-parent",
        ]  # fmt: skip
        offset = self.output.stat().st_size if self.output.exists() else 0
        with self.output.open("ab") as out:
            self.process = subprocess.Popen(
                cmd, cwd=ROOT, env={**os.environ, **self.env}, stdout=out, stderr=out
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.output.read_bytes()[offset:].decode(errors="replace")
            if "ready (pid" in text:
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"worker {self.executor_id} did not start:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL, like a preemption: no cleanup runs."""
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process:
            stop_process(self.process)

    def tail(self, lines: int = 40) -> str:
        if not self.output.exists():
            return ""
        return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])

    def enqueue(self, plan: dict[str, Any], workflow_id: str | None = None) -> str:
        from dbos import DBOSClient

        from console.demo.dbos.agents import APP_VERSION, WORKFLOW_NAME

        wid = workflow_id or f"t-{uuid.uuid4().hex[:10]}"
        client = DBOSClient(system_database_url=self.url)
        try:
            client.enqueue(
                {
                    "queue_name": self.queue,
                    "workflow_name": WORKFLOW_NAME,
                    "workflow_id": wid,
                    "app_version": APP_VERSION,
                },
                {"board": str(self.board), "log": str(self.log), **plan},
            )
        finally:
            client.destroy()
        return wid

    def exec_log(self, wid: str | None = None) -> list[dict[str, Any]]:
        from console.demo.dbos.reservations import read_log

        entries = read_log(self.log)
        return [e for e in entries if wid is None or e.get("wid") == wid or e.get("owner") == wid]


WorkerFactory = Callable[..., DBOSWorker]


@pytest.fixture(scope="module")
def dbos_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dbos")


@pytest.fixture(scope="module")
def dbos_worker_factory(
    dbos_root: Path, agent_channel: AgentChannelRecorder
) -> Iterator[WorkerFactory]:
    """Start workers on the module's database; all are stopped by pid at module end."""
    started: list[DBOSWorker] = []

    def make(executor_id: str, *, root: Path | None = None) -> DBOSWorker:
        """Note: every worker on one database serves every queue registered in it."""
        worker = DBOSWorker(
            root=root or dbos_root,
            executor_id=executor_id,
            queue=f"q-{executor_id}",
            env={
                "IRQ_AGENT_URL": agent_channel.url,
                "IRQ_AGENT_TOKEN": AGENT_TOKEN,
                "IRQ_AGENT_CONTEXT": "local",
            },
        )
        worker.start()
        started.append(worker)
        return worker

    try:
        yield make
    finally:
        for worker in started:
            worker.stop()


@pytest.fixture(scope="module")
def dbos_worker(dbos_worker_factory: WorkerFactory) -> DBOSWorker:
    return dbos_worker_factory("w-main")


# ------------------------------------------------------------------------------ waiting


def wait_until(
    predicate: Callable[[], Any], timeout_s: float = 15.0, interval_s: float = 0.1
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(interval_s)


async def wait_for(
    predicate: Callable[[], Any], timeout_s: float = 15.0, interval_s: float = 0.1
) -> Any:
    """Async polling: ``predicate`` may be a coroutine function."""
    import asyncio
    import inspect

    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(interval_s)


@pytest.fixture
def waiter() -> Callable[..., Any]:
    return wait_for
