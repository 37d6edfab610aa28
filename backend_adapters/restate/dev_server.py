"""A local Restate server (the npm package ``@restatedev/restate-server``, installed by
``make install`` into ``.venv/restate/``) and a Python service under hypercorn, each a
:class:`console.processes.ChildProcess` stopped by its own pid.

Admin, ingress and node ports are free loopback ports (``RESTATE_ADMIN__BIND_ADDRESS``,
``RESTATE_INGRESS__BIND_ADDRESS``, ``RESTATE_BIND_ADDRESS``), TCP only, telemetry off
(``RESTATE_DISABLE_TELEMETRY``); all data lives in ``--base-dir``, so a restart on the same
directory and ports keeps every invocation.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from console.processes import (
    HOST,
    ChildProcess,
    distinct_free_ports,
    free_port,
    start_on_fresh_ports,
    wait_until,
)

#: where ``make install`` puts the npm package (``npm install --prefix .venv/restate``)
NPM_PREFIX = Path(sys.prefix) / "restate"
BINARY_IN_PREFIX = "node_modules/@restatedev/restate-server-linux-x64/bin/restate-server"


def restate_server_binary() -> str:
    """The ``restate-server`` binary: ``$IRQ_RESTATE_SERVER``, the project's npm install, or
    PATH."""
    configured = os.environ.get("IRQ_RESTATE_SERVER")
    if configured:
        return configured
    local = NPM_PREFIX / BINARY_IN_PREFIX
    if local.exists():
        return str(local)
    found = shutil.which("restate-server")
    if found is None:
        raise FileNotFoundError(
            f"restate-server is missing: `make install` puts it in {NPM_PREFIX} (npm package "
            "@restatedev/restate-server@1.7.12)"
        )
    return found


def _wait(check: Callable[[], bool], what: str, timeout_s: float, child: ChildProcess) -> None:
    def exited() -> str | None:
        if child.alive():
            return None
        return f"{what} exited ({child.exit_code()}):\n{child.log_tail()}"

    if not wait_until(check, timeout_s=timeout_s, interval_s=0.1, failed=exited):
        raise TimeoutError(f"{what} not ready after {timeout_s:g}s:\n{child.log_tail()}")


@dataclass
class RestateServer:
    """``restate-server --base-dir DIR`` on free loopback ports."""

    base_dir: Path
    admin_port: int = field(default_factory=free_port)
    ingress_port: int = field(default_factory=free_port)
    node_port: int = field(default_factory=free_port)
    child: ChildProcess | None = None
    #: set once the server has started on its ports (clients hold them), or by a caller that
    #: chose them: a taken port is then an error, never a silent move
    ports_fixed: bool = False

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    @property
    def ingress_url(self) -> str:
        return f"http://{HOST}:{self.ingress_port}"

    def backend_url(self, **params: str | float) -> str:
        extra = "".join(f"&{k}={v}" for k, v in params.items())
        return f"restate+{self.admin_url}?ingress={self.ingress_url}{extra}"

    def env(self) -> dict[str, str]:
        return {
            "RESTATE_ADMIN__BIND_ADDRESS": f"{HOST}:{self.admin_port}",
            "RESTATE_INGRESS__BIND_ADDRESS": f"{HOST}:{self.ingress_port}",
            "RESTATE_BIND_ADDRESS": f"{HOST}:{self.node_port}",
            "RESTATE_ADVERTISED_ADDRESS": f"http://{HOST}:{self.node_port}",
            "RESTATE_LISTEN_MODE": "tcp",
            "RESTATE_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "1",
        }

    def process(self, log: Path | None = None) -> ChildProcess:
        """The server as a child process, not started (``ready`` = the admin API answers)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        return ChildProcess(
            name="restate",
            argv=[restate_server_binary(), "--base-dir", str(self.base_dir), "--no-logo"],
            log=log or self.base_dir / "restate-server.log",
            env=self.env(),
            ready=self.answers,
            stop_signals=(signal.SIGINT,),
        )

    def start(self, timeout_s: float = 60.0, port_tries: int = 3) -> None:
        """Start the server and wait until it answers. On the first start, a server that exits
        because a port was taken meanwhile is started again on fresh ports, up to
        ``port_tries`` times; a restart keeps its ports and raises :class:`PortTaken`."""
        def repick() -> None:
            self.admin_port, self.ingress_port, self.node_port = distinct_free_ports(3)

        start_on_fresh_ports(
            lambda: self._start_once(timeout_s), repick, fixed=self.ports_fixed, tries=port_tries
        )
        self.ports_fixed = True

    def _start_once(self, timeout_s: float) -> None:
        self.stop()  # a try that met a taken port: its log file is closed
        self.child = self.process()
        self.child.start()
        _wait(self.answers, "restate-server", timeout_s, self.child)

    def answers(self) -> bool:
        try:
            reply = httpx.post(
                f"{self.admin_url}/query",
                json={"query": "SELECT count(*) AS n FROM sys_invocation"},
                headers={"accept": "application/json"},
                timeout=2.0,
            )
            ingress = httpx.get(f"{self.ingress_url}/restate/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200 and ingress.status_code < 500

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None

    def register(self, service_url: str) -> dict[str, object]:
        """``POST /deployments {"uri": service_url, "force": true}``: the deployment."""
        reply = httpx.post(
            f"{self.admin_url}/deployments",
            json={"uri": service_url, "force": True},
            timeout=30.0,
        )
        reply.raise_for_status()
        body: dict[str, object] = reply.json()
        return body


@dataclass
class HypercornService:
    """A restate-sdk ASGI app (``module:app``) served by hypercorn on a free port."""

    app: str
    cwd: Path
    log: Path
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    child: ChildProcess | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def process(self) -> ChildProcess:
        """The service as a child process, not started (``ready`` = it answers HTTP)."""
        return ChildProcess(
            name="rs-svc",
            # --workers 0: one process serves the app, so a SIGKILL/SIGSTOP of this pid hits
            # the handler itself (with workers, hypercorn forks one that lives on)
            argv=[
                sys.executable, "-m", "hypercorn", self.app,
                "--bind", f"{HOST}:{self.port}", "--workers", "0",
                # Restate holds its HTTP/2 connections open: do not wait long for them on stop
                "--graceful-timeout", "2",
            ],
            log=self.log,
            env=self.env,
            cwd=self.cwd,
            ready=self.answers,
            # restate-sdk takes SIGTERM for itself on the first request: it only lets the
            # handlers in flight end their HTTP/2 stream without waiting for Restate to close
            # its side, and hypercorn never hears of it; SIGINT stops hypercorn, which cancels
            # those handlers after --graceful-timeout, but a cancelled handler still waits for
            # Restate to close the stream, for ever, unless that SIGTERM came too. So both:
            # with SIGINT alone every stop waited its whole grace and ended in SIGKILL
            stop_signals=(signal.SIGTERM, signal.SIGINT),
        )

    def start(self, timeout_s: float = 60.0) -> None:
        self.child = self.process()
        self.child.start()
        _wait(self.answers, "hypercorn service", timeout_s, self.child)

    def answers(self) -> bool:
        try:
            httpx.get(f"{self.url}/discover", timeout=2.0)
        except httpx.HTTPError:
            return False
        return True

    def stop(self) -> None:
        if self.child is not None:
            # hypercorn's --graceful-timeout is 2 s: a service still there after 4 s holds a
            # handler that will not finish (one thawed after SIGSTOP), so SIGKILL it then
            self.child.stop(grace_s=4.0)
            self.child = None
