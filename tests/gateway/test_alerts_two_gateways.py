"""Two ``irq serve`` on one PostgreSQL journal (the project's test server) over one real DBOS
agent: the interrupt past its one-second deadline is raised as one alert, the same id on both
gateways, and escalated to the webhook once -- not once per gateway. The stalled alert,
raised seconds later and POSTed after it, is the event that proves no second POST came."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.model import Role
from console.processes import stop_process
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import fresh_database
from tests.gateway.test_alerts_end_to_end import AGENT, Receiver, eventually
from tests.gateway.test_alerts_end_to_end import receiver as receiver  # the fixture
from tests.support.crashable_gateway import ROOT, CrashableGateway, gateway_pair


@pytest.fixture
def pair(tmp_path: Path, postgres_server: PostgresServer,
         receiver: Receiver) -> Iterator[list[CrashableGateway]]:
    notify = tmp_path / "notify.toml"
    notify.write_text(f'[notify]\nper_kind = 100\n[[notify.webhooks]]\nurl = "{receiver.url}"\n'
                      'events = ["interrupt_overdue", "stalled"]\n')
    db = tmp_path / "agents.db"
    gws = gateway_pair(tmp_path, f"dbos+sqlite:///{db.resolve()}?poll=0.3",
                       fresh_database(postgres_server),
                       extra_args=["--interrupt-deadline", "1s", "--alert-grace", "0.5s",
                                   "--stalled-after", "3s", "--notify-config", str(notify)])
    agent_token = create_token(Role.AGENT, "agent", gws[0].home, scopes=["dbos:local"])
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 - closed below
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), "--db", str(db)], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "IRQ_AGENT_URL": f"ws://127.0.0.1:{gws[0].port}/agent",
             "IRQ_AGENT_TOKEN": agent_token, "PYTHONPATH": str(ROOT)})
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the agent's database")
        for gw in gws:
            gw.start()
        yield gws
    finally:
        stop_process(agent)
        log.close()
        for gw in gws:
            gw.stop()


async def _alerts(gw: CrashableGateway) -> list[dict[str, Any]]:
    client = GatewayClient(gw.url, gw.tokens["operator"], subscribe=False)
    await client.connect()
    try:
        found: list[dict[str, Any]] = await client.query("alerts")
        return found
    finally:
        await client.close()


def _kind(gw: CrashableGateway, kind: str) -> list[dict[str, Any]]:
    return [a for a in asyncio.run(_alerts(gw)) if a["kind"] == kind]


def test_two_gateways_raise_and_escalate_an_overdue_interrupt_once(
        pair: list[CrashableGateway], receiver: Receiver) -> None:
    first = eventually(lambda: _kind(pair[0], "interrupt_overdue"), "the alert on gw-a")
    second = eventually(lambda: _kind(pair[1], "interrupt_overdue"), "the alert on gw-b")
    assert [a["id"] for a in first] == [a["id"] for a in second] and len(first) == 1
    eventually(lambda: receiver.of_kind("stalled"), "the stalled POST (after the overdue one)")
    posts = receiver.of_kind("interrupt_overdue")
    assert len(posts) == 1, posts
    assert posts[0]["interrupt_id"] == first[0]["subject"]
    assert len(_kind(pair[1], "stalled")) == 1
