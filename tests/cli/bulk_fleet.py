"""``irq serve`` over one DBOS system database per context, each with a real agent process
(``dbos_bulk_agent.py``) running many workflows: the fleet of the bulk-by-filter and --wait
tests. Children are stopped by their pid."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli_harness import ROOT, ServedGateway, start_gateway

from console.processes import free_port, stop_process

AGENT = Path(__file__).with_name("dbos_bulk_agent.py")


@dataclass
class Scope:
    """One backend context: its agent's runs (``gpu`` + ``cpu``)."""

    prefix: str
    gpu: int
    cpu: int = 0
    ask: bool = False


@dataclass
class BulkFleet:
    gateway: ServedGateway
    home: Path
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return self.gateway.env(self.gateway.operator)

    def events(self, prefix: str) -> list[dict[str, Any]]:
        path = self.home / f"events-{prefix}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def released(self, prefix: str) -> set[tuple[str, str]]:
        return {(e["run"], e["id"]) for e in self.events(prefix) if e["event"] == "release"}

    def view(self) -> Any:
        from console.client import GatewayClient

        async def fetch() -> Any:
            client = GatewayClient(self.gateway.url, self.gateway.operator, subscribe=False)
            await client.connect()
            await client.close()
            return client.view

        return asyncio.run(fetch())


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@contextmanager
def bulk_fleet(home: Path, scopes: list[Scope]) -> Iterator[BulkFleet]:
    from console.demo.launcher import dbos_backend_url
    from console.gateway.auth import create_token
    from console.model import Role

    port = free_port()
    token = create_token(Role.AGENT, "bulk-agent", home)
    logs = []
    agents: dict[str, subprocess.Popen[bytes]] = {}
    gateway: ServedGateway | None = None
    try:
        for scope in scopes:
            log = open(home / f"agent-{scope.prefix}.log", "ab")  # noqa: SIM115 - closed below
            logs.append(log)
            args = [
                sys.executable, str(AGENT), "--db", str(home / f"{scope.prefix}.db"),
                "--events", str(home / f"events-{scope.prefix}.jsonl"),
                "--prefix", scope.prefix, "--gpu", str(scope.gpu), "--cpu", str(scope.cpu),
            ]
            agents[scope.prefix] = subprocess.Popen(
                [*args, "--ask"] if scope.ask else args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={
                    **os.environ,
                    "IRQ_AGENT_URL": f"ws://127.0.0.1:{port}/agent",
                    "IRQ_AGENT_TOKEN": token,
                    "PYTHONPATH": str(ROOT),
                },
                cwd=ROOT,
            )
        for scope in scopes:
            db = home / f"{scope.prefix}.db"
            agent = agents[scope.prefix]
            eventually(
                lambda db=db, agent=agent: db.exists() or agent.poll() is not None,  # type: ignore[misc]
                "the agent's database",
            )
            assert agent.poll() is None, (home / f"agent-{scope.prefix}.log").read_text()
        backends = [
            dbos_backend_url(home / f"{s.prefix}.db") + f"?context={s.prefix}&poll=0.3"
            for s in scopes
        ]
        gateway = start_gateway(home, backends, port=port)
        fleet = BulkFleet(gateway, home, agents)
        total = sum(s.gpu + s.cpu for s in scopes)

        def all_beating() -> bool:
            runs = fleet.view().runs.values()
            beating = [r for r in runs if r.heartbeat_at is not None and r.resources]
            return len(beating) >= total

        eventually(all_beating, f"{total} runs beating", timeout=60)
        yield fleet
    finally:
        for agent in agents.values():
            stop_process(agent)
        for log in logs:
            log.close()
        if gateway is not None:
            stop_process(gateway.process)
