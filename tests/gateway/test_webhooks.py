"""Webhooks from a real gateway to a receiver started by the test (a plain HTTP server on
asyncio streams): one message per event kind within the rate limit, a summary for a flood,
retries against a receiver that is down while the gateway keeps answering, the Slack body,
and ``notify_test`` (admin only)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from console.client import GatewayClient, GatewayError
from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Interrupt, Role, Run, RunState, utcnow
from console.notify_config import NotifySettings, WebhookConfig


@dataclass
class Receiver:
    """Collects the JSON bodies POSTed to it; answers ``status``."""

    status: int = 200
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in head[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.headers.append(headers)
        self.bodies.append(json.loads(body))
        writer.write(f"HTTP/1.1 {self.status} X\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    server = await asyncio.start_server(rec.handle, "127.0.0.1", 0)
    rec.port = server.sockets[0].getsockname()[1]
    try:
        yield rec
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class NotifyingGateway:
    gateway: Gateway
    url: str
    tokens: dict[str, str]


async def start_gateway(tmp_path: Path, hooks: list[WebhookConfig], **notify: Any
                        ) -> NotifyingGateway:
    tokens = {r.value: create_token(r, f"{r.value}-test", tmp_path) for r in Role}
    missing = tmp_path / "no-such-dir"
    gw = Gateway(GatewaySettings(
        port=0, home=tmp_path, flush_interval_s=0.02,
        backends=[f"dbos+sqlite:///{missing}/a.db?context=local&poll=5"],
        notify=NotifySettings(webhooks=hooks, **notify)))
    gw.webhooks.backoff_s = 0.05  # the test's patience, not the product's
    await gw.start()
    return NotifyingGateway(gw, f"ws://127.0.0.1:{gw.port}", tokens)


@pytest.fixture
async def gateways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                   ) -> AsyncIterator[Callable[..., Any]]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    started: list[Gateway] = []

    async def start(hooks: list[WebhookConfig], **notify: Any) -> NotifyingGateway:
        running = await start_gateway(tmp_path, hooks, **notify)
        started.append(running.gateway)
        return running

    yield start
    for gw in started:
        await gw.stop()


def lost_runs(count: int, prefix: str = "r") -> list[Run]:
    """Runs whose last beat is an hour old with a 10 s timeout: the hub makes them ``lost``."""
    old = utcnow() - timedelta(hours=1)
    return [Run(id=f"dbos:local/{prefix}{i}", backend="dbos", context="local",
                native_id=f"{prefix}{i}", name=f"job-{i}", state=RunState.RUNNING,
                heartbeat_at=old, heartbeat_interval_s=2.0, heartbeat_timeout_s=10.0)
            for i in range(count)]


def pending(run_id: str, n: int) -> Interrupt:
    return Interrupt(id=f"{run_id}#i{n}", run_id=run_id, title=f"approve step {n}", native_id=f"i{n}",
                     created_at=utcnow())


async def until(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def canary(gateway: Gateway, receiver: Receiver, run_id: str) -> None:
    """Prove that nothing more is on its way: after one more liveness tick and summary flush
    (what would send a late message or a second summary), one more run turns lost and its
    message, behind anything queued before it (one queue, one sender), reaches the receiver
    last. Its window closed with its summary, so the canary is let through at once."""
    gateway.hub.tick()
    gateway.webhooks.flush_summaries()
    old = utcnow() - timedelta(hours=1)
    gateway.hub.observe_runs([Run(
        id=run_id, backend="dbos", context="local", native_id=run_id.rpartition("/")[2],
        name="canary", state=RunState.RUNNING, heartbeat_at=old, heartbeat_interval_s=2.0,
        heartbeat_timeout_s=10.0)])
    gateway.hub.tick()
    await until(lambda: any(b["run_id"] == run_id for b in receiver.bodies), "the canary")
    assert receiver.bodies[-1]["run_id"] == run_id, receiver.bodies[-1]


async def test_one_message_per_kind_then_a_summary_for_the_flood(
        gateways: Callable[..., Any], receiver: Receiver) -> None:
    running = await gateways([WebhookConfig(url=receiver.url)], per_kind=1, window_s=1.5)
    hub = running.gateway.hub
    hub.observe_runs(lost_runs(300))  # 300 runs turn lost at once
    hub.observe_interrupts("dbos:local", [pending("dbos:local/r0", 1)], complete=False,
                           decided=lambda _iid: None)
    hub.publish("notice", {"level": "warning", "run_id": "dbos:local/r1",
                           "message": "dbos:local/r1: no release report after pause; "
                           "suspected leak of gpu-1"})
    hub.publish("obligation", {"id": "dbos:local/r2#c1/notify", "rule": "notify",
                               "run_id": "dbos:local/r2", "what": "tell the owner",
                               "state": "overdue"})
    await until(lambda: len(receiver.bodies) >= 4, "one message per kind")
    kinds = sorted(b["kind"] for b in receiver.bodies)
    assert kinds == ["interrupt", "leak", "lost", "obligation"]
    lost = next(b for b in receiver.bodies if b["kind"] == "lost")
    assert set(lost) == {"kind", "at", "run_id", "title", "message", "gateway"}
    assert lost["gateway"] == running.url and lost["run_id"].startswith("dbos:local/r")
    await until(lambda: len(receiver.bodies) >= 5, "the flood's summary")
    await canary(running.gateway, receiver, "dbos:local/canary")  # nothing else came
    assert len(receiver.bodies) == 6
    summary = receiver.bodies[4]
    assert summary["kind"] == "lost"
    assert summary["message"] == "and 299 more runs turned lost in the last 1.5 s"
    stats = running.gateway.stats()["notifications"]
    assert stats["sent"] == 6 and stats["rate_limited"] == 299


async def test_a_receiver_that_is_down_gets_retries_and_the_gateway_stays_up(
        gateways: Callable[..., Any]) -> None:
    down = f"http://127.0.0.1:{free_port()}/hook"
    running = await gateways([WebhookConfig(url=down)])
    running.gateway.hub.observe_runs(lost_runs(1))
    hooks = running.gateway.webhooks
    client = GatewayClient(running.url, running.tokens["viewer"], subscribe=False)
    await client.connect()
    try:
        await until(lambda: hooks.counters["dropped"] == 1, "the message dropped", timeout=15)
        assert hooks.counters["retries"] == hooks.attempts - 1 == 4
        assert await client.ping() >= 0  # the gateway answered all along
        stats = await client.query("stats")
        assert stats["notifications"]["dropped"] == 1
        assert stats["notifications"]["retries"] == 4
    finally:
        await client.close()


async def test_a_5xx_is_retried_then_slack_body(
        gateways: Callable[..., Any], receiver: Receiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", "Bearer s3cret")
    receiver.status = 503
    running = await gateways([WebhookConfig(url=receiver.url, format="slack",
                                            events=["lost"],
                                            header_env="Authorization:HOOK_SECRET")])
    running.gateway.hub.observe_runs(lost_runs(1))
    hooks = running.gateway.webhooks
    await until(lambda: hooks.counters["dropped"] == 1, "retries exhausted", timeout=15)
    assert len(receiver.bodies) == 5  # five attempts reached the receiver
    assert receiver.headers[0]["authorization"] == "Bearer s3cret"
    body = receiver.bodies[0]
    assert list(body) == ["text"] and "job-0" in body["text"] and "turned lost" in body["text"]


async def test_notify_test_answers_per_webhook_and_needs_admin(
        gateways: Callable[..., Any], receiver: Receiver) -> None:
    down = f"http://127.0.0.1:{free_port()}/hook"
    running = await gateways([WebhookConfig(url=receiver.url), WebhookConfig(url=down)])
    running.gateway.webhooks.attempts = 2
    admin = GatewayClient(running.url, running.tokens["admin"], subscribe=False)
    viewer = GatewayClient(running.url, running.tokens["viewer"], subscribe=False)
    await admin.connect()
    await viewer.connect()
    try:
        results = await admin.query("notify_test")
        assert [(r["url"], r["ok"]) for r in results] == [(receiver.url, True), (down, False)]
        assert "ConnectError" in results[1]["error"]
        assert receiver.bodies[0]["kind"] == "test"
        with pytest.raises(GatewayError, match="admin"):
            await viewer.query("notify_test")
    finally:
        await admin.close()
        await viewer.close()


async def test_real_agent_heartbeats_going_silent_notify_late_then_lost_once_per_kind(
        gateways: Callable[..., Any], receiver: Receiver) -> None:
    from tests.gateway.agent_wire import agent

    running = await gateways([WebhookConfig(url=receiver.url, events=["late", "lost"])],
                             per_kind=1, window_s=1.5)
    names = ["a1", "a2", "a3"]
    running.gateway.hub.observe_runs([  # as the adapter reports them
        Run(id=f"dbos:local/{n}", backend="dbos", context="local", native_id=n, name=n,
            state=RunState.RUNNING) for n in names])
    async with agent(running.url, running.tokens["agent"]) as wire:
        for n in names:
            assert await wire.beat(n, interval_s=0.2, timeout_s=2.5) is None
    # the agent is gone: late after ~1.2 s, lost after 2.5 s, then each kind's summary
    await until(lambda: len(receiver.bodies) >= 4, "late, lost and their summaries", timeout=30)
    await canary(running.gateway, receiver, "dbos:local/canary")  # nothing else came
    assert receiver.bodies.pop()["kind"] == "lost"
    kinds = [(b["kind"], b["message"].startswith("and ")) for b in receiver.bodies]
    assert sorted(kinds) == [("late", False), ("late", True), ("lost", False), ("lost", True)]
    summaries = {b["kind"]: b["message"] for b in receiver.bodies if b["run_id"] is None}
    assert summaries == {"late": "and 2 more runs turned late in the last 1.5 s",
                         "lost": "and 2 more runs turned lost in the last 1.5 s"}
    assert all(b["run_id"] in {f"dbos:local/{n}" for n in names}
               for b in receiver.bodies if not b["message"].startswith("and "))
