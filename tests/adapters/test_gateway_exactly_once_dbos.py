"""Exactly-once decisions through the gateway, against real DBOS agents on SQLite.

The gateway runs as a real ``irq serve`` subprocess. One test SIGKILLs it between the journaled
intent and the outcome (IRQ_FAULT=crash_after_intent) and checks that, after a restart, the
decision reaches the agent exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_dbos_adapter import deploy, plan, step

from console.client import GatewayClient, GatewayUnreachable
from console.gateway.auth import create_token
from console.model import Decision, DecisionKind, Role
from console.processes import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]


class ServedGateway:
    def __init__(self, home: Path, db: Path) -> None:
        self.home, self.db = home, db
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home / "gateway.log"

    def start(self, fault: str | None = None) -> None:
        env = {**os.environ, "IRQ_HOME": str(self.home)}
        env.pop("IRQ_FAULT", None)
        if fault:
            env["IRQ_FAULT"] = fault
        cmd = [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
               "--backend", f"dbos+sqlite:///{self.db}?poll=0.3"]
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
def served(tmp_path, dbos_worker):
    home = tmp_path / "irq"
    home.mkdir()
    gw = ServedGateway(home, dbos_worker.db)
    gw.tokens = {r: create_token(Role(r), f"{r}-1", home) for r in ("operator", "admin")}  # type: ignore[attr-defined]
    try:
        yield gw
    finally:
        gw.stop()


async def _pending(client: GatewayClient, wid: str, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + wid):
                return intr.id
        await asyncio.wait_for(client.updates(), timeout_s)
    raise AssertionError(f"no pending interrupt for {wid}")


def _decisions(worker, wid: str) -> list[dict]:
    return [e for e in worker.exec_log(wid) if e["event"] == "decision"]


async def _wait_decisions(worker, wid: str, n: int, timeout_s: float = 20) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _decisions(worker, wid)
        if len(found) >= n:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"{wid}: expected {n} decision(s), agent log has {_decisions(worker, wid)}")


async def test_gateway_killed_between_intent_and_outcome_applies_decision_once(served, dbos_worker):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    served.start(fault="crash_after_intent")
    async with GatewayClient(served.url, served.tokens["operator"]) as client:
        iid = await _pending(client, wid)
        with pytest.raises(GatewayUnreachable):
            await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                 key="crash-key-1")
    served.process.wait(10)
    assert served.process.returncode == -signal.SIGKILL
    await asyncio.sleep(1.5)
    assert _decisions(dbos_worker, wid) == []  # the intent was journaled, nothing delivered

    served.start()  # no fault: recovery re-drives the journaled intent
    decided = await _wait_decisions(dbos_worker, wid, 1)
    async with GatewayClient(served.url, served.tokens["admin"]) as client:
        # the same key again: the recorded result, nothing re-sent
        again = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE),
                                     key="crash-key-1")
        assert again[0].outcome == "applied" and again[0].replayed
        # another key: a conflict, whoever sends it
        other = await client.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE))
        assert other[0].outcome == "conflict"
        audit = await client.query("audit", limit=20)
    await asyncio.sleep(2)
    assert len(_decisions(dbos_worker, wid)) == 1
    assert decided[0]["type"] == "approve"
    assert any("re-driven after a gateway restart" in a["detail"] for a in audit)


async def test_two_clients_approving_at_once_deliver_one_decision(served, dbos_worker):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    served.start()
    async with GatewayClient(served.url, served.tokens["operator"]) as a, \
            GatewayClient(served.url, served.tokens["admin"]) as b:
        iid = await _pending(a, wid)
        await _pending(b, wid)
        ra, rb = await asyncio.gather(
            a.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE)),
            b.command("decide", [iid], decision=Decision(kind=DecisionKind.APPROVE)),
        )
    outcomes = sorted([ra[0].outcome, rb[0].outcome])
    assert outcomes == ["applied", "conflict"]
    await _wait_decisions(dbos_worker, wid, 1)
    await asyncio.sleep(2)
    assert len(_decisions(dbos_worker, wid)) == 1


async def test_the_same_command_sent_twice_at_once_is_executed_once(served, dbos_worker):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    served.start()
    async with GatewayClient(served.url, served.tokens["operator"]) as a, \
            GatewayClient(served.url, served.tokens["admin"]) as b:
        iid = await _pending(a, wid)
        approve = Decision(kind=DecisionKind.APPROVE)
        ra, rb = await asyncio.gather(
            a.command("decide", [iid], decision=approve, key="same-key"),
            b.command("decide", [iid], decision=approve, key="same-key"),
        )
        results = sorted([ra[0], rb[0]], key=lambda r: r.replayed)
        assert results[0].outcome == "applied" and not results[0].replayed
        assert results[1].replayed and (
            results[1].outcome == "applied" or results[1].error == "in_progress")
        later = await a.command("decide", [iid], decision=approve, key="same-key")
        assert later[0].outcome == "applied" and later[0].replayed
    await _wait_decisions(dbos_worker, wid, 1)
    await asyncio.sleep(2)
    assert len(_decisions(dbos_worker, wid)) == 1
