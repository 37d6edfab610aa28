"""A local LangGraph Agent Server (``langgraph dev`` from ``langgraph-cli[inmem]``), stopped by
its own pid.

Used by the tests, the demo and the benchmark. The server runs on a free loopback port in a
directory of the caller's choosing, on a ``langgraph.json`` that names the graphs, with the
CLI's analytics, its PyPI version check and LangSmith tracing off (it would otherwise try the
network twice at start; ``docs/backends/langgraph.md`` §1). ``langgraph dev`` silently moves
to another port when its port is busy, so readiness means ``GET /ok`` answers **and** the
server's own log names our port.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from console.processes import (
    HOST,
    ChildProcess,
    PortTaken,
    executable,
    free_port,
    start_on_fresh_ports,
    wait_until,
)

#: environment that keeps ``langgraph dev`` offline and quiet
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


def langgraph_cli() -> str:
    """The ``langgraph`` CLI next to this Python (the extra installs it), else on PATH."""
    return executable(
        "langgraph", missing="the langgraph CLI is missing: pip install 'irq[langgraph]'"
    )


def write_config(
    workdir: Path, graphs: Mapping[str, str], *, env: Mapping[str, str] | None = None
) -> Path:
    """Write ``workdir/langgraph.json`` naming ``graphs`` (name -> ``path.py:variable``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, object] = {"dependencies": ["."], "graphs": dict(graphs)}
    if env:
        config["env"] = dict(env)
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2))
    return path


@dataclass
class AgentServer:
    """``langgraph dev --no-browser --no-reload`` on a free loopback port, in ``workdir``
    (which holds ``langgraph.json``; the in-memory runtime pickles its state under
    ``workdir/.langgraph_api``, so a restart on the same directory keeps the threads)."""

    workdir: Path
    port: int = field(default_factory=free_port)
    jobs_per_worker: int = 4
    extra_env: dict[str, str] = field(default_factory=dict)
    child: ChildProcess | None = None
    #: set once the server has started on its ports (clients hold them), or by a caller that
    #: chose them: a taken port is then an error, never a silent move
    ports_fixed: bool = False

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def backend_url(self, **params: object) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"langgraph+{self.url}" + (f"?{query}" if query else "")

    @property
    def log(self) -> Path:
        return self.workdir / "agent-server.log"

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child else None

    def argv(self) -> list[str]:
        return [
            langgraph_cli(),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--n-jobs-per-worker",
            str(self.jobs_per_worker),
            "--config",
            str(self.workdir / "langgraph.json"),
        ]

    def answers(self) -> bool:
        """``GET /ok`` answers ``{"ok": true}`` on our port."""
        try:
            r = httpx.get(f"{self.url}/ok", timeout=1.0)
            return r.status_code == 200 and r.json().get("ok") is True
        except (httpx.HTTPError, ValueError):
            return False

    def _moved(self) -> str | None:
        """The log line saying the CLI took another port (ours was busy)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if f"Port {self.port} is already in use" in line:
                return line.strip()
        return None

    def start(self, timeout: float = 90.0, port_tries: int = 3) -> None:
        """Start the server and wait until it answers on its port. On the first start, a port
        taken meanwhile (the CLI then moves to another, which clients would not know) is
        replaced by a fresh one, up to ``port_tries`` times; a restart keeps its port and
        raises :class:`PortTaken`."""
        def repick() -> None:
            self.port = free_port()

        start_on_fresh_ports(
            lambda: self._start_once(timeout), repick, fixed=self.ports_fixed, tries=port_tries
        )
        self.ports_fixed = True

    def _start_once(self, timeout: float) -> None:
        if self.answers():  # somebody else's server is on the port we were given
            raise PortTaken(f"port {self.port} already answers /ok: not our Agent Server")
        self.child = ChildProcess(
            name="langgraph-dev",
            argv=self.argv(),
            log=self.log,
            env={**OFFLINE_ENV, **self.extra_env},
            cwd=self.workdir,  # graph paths and the in-memory runtime's files are relative
        )
        self.child.start()
        child = self.child
        if wait_until(self._ready, timeout_s=timeout, interval_s=0.2, failed=self._exited):
            return
        tail = child.log_tail(30)
        self.stop()
        raise RuntimeError(f"langgraph dev did not answer /ok within {timeout:g}s: {tail}")

    def _exited(self) -> str | None:
        assert self.child is not None
        if self.child.alive():
            return None
        return f"langgraph dev exited ({self.child.exit_code()}): {self.child.log_tail(30)}"

    def _ready(self) -> bool:
        """Answers /ok on our port; RuntimeError (after stopping it) when it took another."""
        moved = self._moved()
        if moved is not None:
            self.stop()
            raise PortTaken(f"langgraph dev did not take port {self.port}: {moved}")
        return self.answers()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None

