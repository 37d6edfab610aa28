"""A real gateway (``irq serve``) and a real DBOS demo fleet in subprocesses, for the TUI's
tests and ``make screenshots`` (``tools/screenshots.py``). Everything lives in one directory
used as ``IRQ_HOME``; children are :class:`console.processes.ChildProcess`, stopped by their
pid (SIGTERM to their own process group, then SIGKILL).

    with LiveFleet(home) as fleet:
        fleet.url, fleet.tokens["operator"], fleet.tokens["viewer"]
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from console.client import FleetView, GatewayClient, GatewayError
from console.model import Role
from console.processes import (
    HOST,
    ChildProcess,
    exit_error,
    free_port,
    start_on_fresh_ports,
)


@dataclass
class LiveFleet:
    """``irq serve`` on a free port + ``python -m console.demo.dbos.fleet`` heartbeating to it."""

    home: Path
    agents: int = 10
    workers: int = 2
    step_scale: float = 1.0
    preempt_every_s: float = 0.0  # 0: no preemptions (deterministic tests)
    downtime_s: float = 15.0  # how long a preempted worker stays down (the fleet's default)
    #: the demo's showcase too (a failed month-end close, a stuck and a slow agent, a purchase
    #: approval waiting in its own DBOS.recv): console/demo/dbos/showcase.py
    showcase: bool = False
    port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)
    children: list[ChildProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"ws://{HOST}:{self.port}"

    @property
    def db(self) -> Path:
        return self.home / "fleet.db"

    def __enter__(self) -> LiveFleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, ready_timeout_s: float = 90.0) -> None:
        from console.gateway.auth import create_token  # the harness mints its own tokens

        self.home.mkdir(parents=True, exist_ok=True)
        for role in (Role.OPERATOR, Role.VIEWER, Role.AGENT, Role.ADMIN):
            self.tokens[role.value] = create_token(role, f"tui-{role.value}", self.home)
        env = {"IRQ_HOME": str(self.home)}
        self.children = []
        try:
            self._start_gateway(env, ready_timeout_s)
            fleet = ChildProcess(
                "fleet",
                [sys.executable, "-m", "console.demo.dbos.fleet", "--db", str(self.db),
                 "--agents", str(self.agents), "--workers", str(self.workers),
                 "--preempt-every", str(self.preempt_every_s),
                 "--step-scale", str(self.step_scale), "--downtime", str(self.downtime_s),
                 *(["--showcase", "--approval-rest", "2"] if self.showcase else [])],
                self.home / "fleet.log",
                {**env, "IRQ_AGENT_URL": f"{self.url}/agent",
                 "IRQ_AGENT_TOKEN": self.tokens["agent"]},
            )
            self.children.append(fleet)
            fleet.start()
            self._wait(lambda: None if self.view().runs else "no runs yet", fleet,
                       ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start_gateway(self, env: dict[str, str], timeout_s: float) -> None:
        """Start the gateway on ``port``, or on a free one: a port picked here and taken
        before the gateway bound it (the gateway says so and exits) is replaced by a fresh
        one, up to three times. A port the caller chose is theirs: taken is an error."""
        chosen = bool(self.port)
        self.port = self.port or free_port()

        def start_once() -> None:
            self.stop()  # a try that met a taken port: its log file is closed
            gateway = ChildProcess(
                "gateway",
                [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
                 "--backend", f"dbos+sqlite:///{self.db}"],
                self.home / "gateway.log",
                env,
            )
            self.children = [gateway]
            gateway.start()
            self._wait(lambda: self._answers(), gateway, timeout_s)

        def repick() -> None:
            self.port = free_port()

        start_on_fresh_ports(start_once, repick, fixed=chosen)

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()

    def _wait(self, check: Callable[[], str | None], child: ChildProcess,
              timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        reason: str | None = "not started"
        while time.monotonic() < deadline:
            if not child.alive():
                raise exit_error(f"{child.name} exited:\n{child.log_tail(30)}")
            reason = check()
            if reason is None:
                return
            time.sleep(0.3)
        raise RuntimeError(f"{child.name} not ready after {timeout_s:g}s ({reason}):\n"
                           f"{child.log_tail(30)}")

    def _answers(self) -> str | None:
        try:
            self.view()
        except GatewayError as exc:
            return exc.message
        return None

    def view(self, role: str = "operator") -> FleetView:
        """A one-shot snapshot of the gateway's index."""

        async def fetch() -> FleetView:
            client = GatewayClient(self.url, self.tokens[role], client="irq-tui-harness",
                                   subscribe=False, open_timeout=2, request_timeout=10)
            await client.connect()
            await client.close()
            return client.view

        return asyncio.run(fetch())
