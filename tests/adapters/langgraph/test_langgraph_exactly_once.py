"""Exactly-once decisions through a real gateway to a real Agent Server: a gateway SIGKILLed
between the journaled intent and the outcome delivers once after a restart, and two clients
approving at once deliver once. "Once" is read from the server: the thread's runs (one resume
run) and the value the node recorded."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_scenarios import ServerClient

from backend_adapters.langgraph.dev_server import AgentServer
from console.client import GatewayClient, GatewayUnreachable
from console.gateway.auth import create_token
from console.model import Decision, DecisionKind, Role
from console.processes import free_port, stop_process

ROOT = Path(__file__).resolve().parents[3]


class Gateway:
    def __init__(self, home: Path, backend: str) -> None:
        self.home, self.backend = home, backend
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home / "gateway.log"
        self.operator = create_token(Role.OPERATOR, "ann", home)
        self.admin = create_token(Role.ADMIN, "bob", home)

    def start(self, crash_at: str | None = None) -> None:
        """``irq serve``, or with ``crash_at`` the test-only gateway that SIGKILLs itself."""
        env = {**os.environ, "IRQ_HOME": str(self.home)}
        if crash_at:
            cmd = [sys.executable, str(ROOT / "tests" / "support" / "faulty_gateway.py"),
                   "--port", str(self.port), "--backend", self.backend, "--crash-at", crash_at]
        else:
            cmd = [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
                   "--backend", self.backend]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("gateway did not start:\n" + self.log.read_text()[-3000:])

    def stop(self) -> None:
        if self.process:
            stop_process(self.process)


@pytest.fixture
def gateway(tmp_path: Path, agent_server: AgentServer) -> Iterator[Gateway]:
    home = tmp_path / "irq"
    home.mkdir()
    gw = Gateway(home, agent_server.backend_url(poll=0.3))
    try:
        yield gw
    finally:
        gw.stop()


async def pending(client: GatewayClient, tid: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + tid):
                return intr.id
        await asyncio.wait_for(client.updates(), timeout_s)
    raise AssertionError(f"no pending interrupt for thread {tid}")


def resume_runs(server: ServerClient, tid: str) -> list[dict]:
    return [r for r in server.runs(tid) if (r.get("kwargs") or {}).get("command")]


async def test_gateway_killed_between_intent_and_outcome_delivers_once_after_restart(
    gateway: Gateway, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    gateway.start(crash_at="after_intent")
    async with GatewayClient(gateway.url, gateway.operator) as client:
        iid = await pending(client, tid)
        with pytest.raises(GatewayUnreachable):
            await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                 key="crash-key-1")
    assert gateway.process is not None
    gateway.process.wait(10)
    assert gateway.process.returncode == -signal.SIGKILL
    # journaled, not sent: the thread still waits and got no resume
    assert resume_runs(server, tid) == []
    assert server.thread(tid)["status"] == "interrupted"

    gateway.start()  # recovery re-drives the journaled intent
    values = server.wait_status(tid, "idle")["values"]
    assert values["response"] == {"type": "accept", "args": None}
    async with GatewayClient(gateway.url, gateway.admin) as client:
        again = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                     key="crash-key-1")
        assert again[0].outcome == "applied" and again[0].replayed
        other = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE))
        assert other[0].outcome == "conflict"
    assert len(resume_runs(server, tid)) == 1


async def test_two_clients_approving_at_once_deliver_one_decision(
    gateway: Gateway, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    gateway.start()
    async with GatewayClient(gateway.url, gateway.operator) as a, \
            GatewayClient(gateway.url, gateway.admin) as b:
        iid = await pending(a, tid)
        await pending(b, tid)
        ra, rb = await asyncio.gather(
            a.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE)),
            b.command("decide", [iid], decision=Decision(kind=DecisionKind.REJECT,
                                                          feedback="no")),
        )
    assert sorted([ra[0].outcome, rb[0].outcome]) == ["applied", "conflict"]
    values = server.wait_status(tid, "idle")["values"]
    winner = ra[0] if ra[0].outcome == "applied" else rb[0]
    expected = "accept" if winner.action == "approve" else "response"
    assert values["response"]["type"] == expected
    assert len(resume_runs(server, tid)) == 1
