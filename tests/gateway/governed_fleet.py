"""A real DBOS agent (governed_dbos_agent.py, a subprocess on SQLite) under an in-process gateway
that can be stopped and started again on the same IRQ_HOME (its journal) and port, with one
token per person: operators alice, bob, carol; admin root; viewer watcher."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.client import GatewayClient
from console.demo.launcher import dbos_backend_url
from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Interrupt, Role
from console.processes import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = {"alice": Role.OPERATOR, "bob": Role.OPERATOR, "carol": Role.OPERATOR,
          "root": Role.ADMIN, "watcher": Role.VIEWER}


@dataclass
class GovernedFleet:
    home: Path
    specs: list[dict[str, Any]]
    policy: Path | None = None
    port: int = field(default_factory=free_port)
    tokens: dict[str, str] = field(default_factory=dict)
    gateway: Gateway | None = None
    agent: subprocess.Popen[bytes] | None = None

    @property
    def db(self) -> Path:
        return self.home / "agents.db"

    @property
    def events(self) -> Path:
        return self.home / "agent-events.jsonl"

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start_agent(self) -> None:
        spec = self.home / "spec.json"
        spec.write_text(json.dumps(self.specs))
        log = (self.home / "agent.log").open("ab")
        self.agent = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("governed_dbos_agent.py")),
             "--db", str(self.db), "--events", str(self.events), "--spec", str(spec)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith("IRQ_AGENT")}
            | {"PYTHONPATH": str(ROOT)})
        log.close()
        deadline = time.monotonic() + 60
        while not self.db.exists():
            assert self.agent.poll() is None, (self.home / "agent.log").read_text()
            assert time.monotonic() < deadline, "the agent did not create its database"
            time.sleep(0.1)

    async def start_gateway(self) -> None:
        self.gateway = Gateway(GatewaySettings(
            port=self.port, home=self.home, flush_interval_s=0.02, policy_path=self.policy,
            backends=[dbos_backend_url(self.db) + "?poll=0.3"]))
        await self.gateway.start()

    async def stop_gateway(self) -> None:
        if self.gateway is not None:
            await self.gateway.stop()
            self.gateway = None

    def client(self, person: str) -> GatewayClient:
        return GatewayClient(self.url, self.tokens[person])

    def decisions(self, wid: str) -> list[dict[str, Any]]:
        """The decisions the agent itself recorded for this workflow."""
        if not self.events.exists():
            return []
        lines = [json.loads(line) for line in self.events.read_text().splitlines() if line]
        return [e for e in lines if e["wid"] == wid and e["event"] == "decision"]

    def stop(self) -> None:
        if self.agent is not None:
            stop_process(self.agent)


def make_fleet(home: Path, specs: list[dict[str, Any]], policy: Path | None = None) -> GovernedFleet:
    fleet = GovernedFleet(home=home, specs=specs, policy=policy)
    fleet.tokens = {who: create_token(role, who, home) for who, role in PEOPLE.items()}
    return fleet


async def pending_interrupt(client: GatewayClient, wid: str, timeout_s: float = 30) -> Interrupt:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + wid):
                return intr
        try:
            await asyncio.wait_for(client.updates(), max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            break
    raise AssertionError(f"no pending interrupt for {wid}")


async def interrupt_where(client: GatewayClient, iid: str, check: Any,
                          timeout_s: float = 10) -> Interrupt:
    """Wait until the client's view of the interrupt passes ``check``."""
    deadline = time.monotonic() + timeout_s
    while True:
        intr = client.view.interrupts.get(iid)
        if intr is not None and check(intr):
            return intr
        if time.monotonic() > deadline:
            raise AssertionError(f"{iid} never matched; last seen {intr!r}")
        try:
            await asyncio.wait_for(client.updates(), max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            pass


async def later_recv_polls(db: Path, wid: str, polls: int = 2, timeout_s: float = 60) -> None:
    """Wait until the workflow has journaled ``polls`` more ``DBOS.recv`` polls than now.

    The proof that nothing was sent to a waiting agent: a decision sent before now is in the
    notifications table before the second of those polls starts (the first may have begun
    before it), and that poll would have taken it. A fixed sleep proves nothing on a slow
    machine."""
    from devtools.dbos_record import read_record

    def count() -> int:
        return read_record(db, wid).steps.count("DBOS.recv")

    target = await asyncio.to_thread(count) + polls
    deadline = time.monotonic() + timeout_s
    while await asyncio.to_thread(count) < target:
        assert time.monotonic() < deadline, f"{wid} stopped polling for its decision"
        await asyncio.sleep(0.1)
