"""``irq serve`` and one real DBOS agent whose every text field carries escape sequences
(``tests/support/hostile_dbos_agent.py``), for the terminal-safety tests of the CLI and the
TUI. Children are :class:`console.processes.ChildProcess`, stopped by their pid.

    with HostileFleet(home) as fleet:
        fleet.url, fleet.tokens["operator"], fleet.wait_until_waiting()
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
from console.processes import HOST, ChildProcess, free_port
from tests.support.hostile_dbos_agent import RUN_ID

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).with_name("hostile_dbos_agent.py")


@dataclass
class HostileFleet:
    home: Path
    port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)
    children: list[ChildProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"ws://{HOST}:{self.port}"

    def __enter__(self) -> HostileFleet:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 90.0) -> None:
        from console.gateway.auth import create_token

        self.home.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        for role in (Role.OPERATOR, Role.VIEWER):
            self.tokens[role.value] = create_token(role, f"hostile-{role.value}", self.home)
        self.tokens["agent"] = create_token(Role.AGENT, "hostile-agent", self.home,
                                            scopes=["dbos:local/wf-hostile-"])
        db = self.home / "hostile.db"
        env = {"IRQ_HOME": str(self.home), "PYTHONPATH": str(ROOT)}
        agent = ChildProcess(
            "agent",
            [sys.executable, str(AGENT), "--db", str(db)],
            self.home / "agent.log",
            {**env, "IRQ_AGENT_URL": f"{self.url}/agent",
             "IRQ_AGENT_TOKEN": self.tokens["agent"]},
        )
        gateway = ChildProcess(
            "gateway",
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
             "--backend", f"dbos+sqlite:///{db}?poll=0.3"],
            self.home / "gateway.log",
            env,
        )
        self.children = [agent, gateway]
        agent.start()
        self._wait(lambda: db.exists(), agent, "the agent's database", timeout_s)
        gateway.start()
        self._wait(self._answers, gateway, "the gateway", timeout_s)
        self.wait_until_waiting(timeout_s)

    def wait_until_waiting(self, timeout_s: float = 90.0) -> FleetView:
        """Until the hostile run shows its interrupt, its journal step and its heartbeat."""
        view: FleetView | None = None

        def ready() -> bool:
            nonlocal view
            view = self.view()
            run = view.runs.get(RUN_ID)
            return bool(run and run.interrupts and run.resources and run.heartbeat_at)

        self._wait(ready, self.children[0], "the hostile run waiting on its interrupt",
                   timeout_s)
        assert view is not None
        return view

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()

    def _answers(self) -> bool:
        try:
            self.view()
        except GatewayError:
            return False
        return True

    def view(self) -> FleetView:
        async def fetch() -> FleetView:
            client = GatewayClient(self.url, self.tokens["operator"], client="hostile-harness",
                                   subscribe=False, open_timeout=2, request_timeout=10)
            await client.connect()
            await client.close()
            return client.view

        return asyncio.run(fetch())

    def _wait(self, check: Callable[[], bool], child: ChildProcess, what: str,
              timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for started in self.children:
                if started.popen is not None and not started.alive():
                    raise RuntimeError(f"{started.name} exited:\n{started.log_tail(30)}")
            if check():
                return
            time.sleep(0.3)
        raise RuntimeError(f"not ready after {timeout_s:g}s: {what}\n{child.log_tail(30)}")
