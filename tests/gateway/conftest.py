"""An in-process gateway on a free loopback port, with its own IRQ_HOME and tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role


@dataclass
class RunningGateway:
    gateway: Gateway
    url: str
    home: Path
    tokens: dict[str, str]


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningGateway]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    tokens = {role.value: create_token(role, f"{role.value}-test", tmp_path) for role in Role}
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, flush_interval_s=0.02))
    await gw.start()
    try:
        yield RunningGateway(gw, f"ws://127.0.0.1:{gw.port}", tmp_path, tokens)
    finally:
        await gw.stop()


@dataclass
class TrustGateway:
    """A gateway with two DBOS contexts (``dbos:local``, ``dbos:other``; their databases do
    not exist, so runs are put into the hub by the test) and scoped agent tokens."""

    gateway: Gateway
    url: str
    home: Path
    tokens: dict[str, str]

    def observe(self, *native_ids: str, context: str = "local") -> list[str]:
        from console.model import Run

        runs = [Run(id=f"dbos:{context}/{n}", backend="dbos", context=context, native_id=n,
                    name=n) for n in native_ids]
        self.gateway.hub.observe_runs(runs)
        return [r.id for r in runs]


@pytest.fixture
async def trust_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TrustGateway]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    tokens = {
        "agent-a": create_token(Role.AGENT, "agent-a", tmp_path, scopes=["dbos:local"]),
        "agent-b": create_token(Role.AGENT, "agent-b", tmp_path, scopes=["dbos:local"]),
        "team-a": create_token(Role.AGENT, "team-a", tmp_path, scopes=["dbos:local/team-a-"]),
        "legacy": create_token(Role.AGENT, "legacy", tmp_path),
        "operator": create_token(Role.OPERATOR, "ops", tmp_path),
        "admin": create_token(Role.ADMIN, "root", tmp_path),
        "viewer": create_token(Role.VIEWER, "watcher", tmp_path),
    }
    missing = tmp_path / "no-such-dir"
    gw = Gateway(GatewaySettings(
        port=0, home=tmp_path, flush_interval_s=0.02, heartbeat_coalesce_s=0.05,
        backends=[f"dbos+sqlite:///{missing}/a.db?context=local&poll=5",
                  f"dbos+sqlite:///{missing}/b.db?context=other&poll=5"]))
    await gw.start()
    try:
        yield TrustGateway(gw, f"ws://127.0.0.1:{gw.port}", tmp_path, tokens)
    finally:
        await gw.stop()
