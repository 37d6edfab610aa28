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
