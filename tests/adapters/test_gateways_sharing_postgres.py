"""Several gateways on one PostgreSQL journal, against a real DBOS agent on SQLite.

Two real ``irq serve`` processes, each with its own IRQ_HOME (tokens) and port, share one
journal on the project's own PostgreSQL server (tests/adapters/postgres_server.py), reached
as a role that logs in with a password. Two operators, one on each gateway, decide the same
interrupt at once: the database's decision claim lets exactly one deliver (``applied``), the
other gets ``conflict``, and the agent's own record (devtools/dbos_record.py) shows one
message, consumed once. When a gateway is killed between intent and outcome, its peer adopts
the intent once the dead one's liveness lapsed and delivers it, once. The password never
appears in a gateway's log or in ``irq`` output.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dbos_adapter import deploy, plan, step

from console.client import GatewayClient, GatewayUnreachable
from console.model import Decision, DecisionKind
from devtools.dbos_record import read_record, settled_record
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.support.crashable_gateway import ROOT, CrashableGateway, gateway_pair

ROLE = "irq_gateway"
PASSWORD = "journal-Pw-7f3a9c"  # a string that cannot appear in a log by accident
DATABASE = "irq_journal"
APPROVE = Decision(kind=DecisionKind.APPROVE)


@pytest.fixture(scope="module")
def shared_journal(postgres_server: PostgresServer) -> str:
    """A database owned by ``ROLE``, which the server authenticates by password (a rule put
    first in this throw-away server's pg_hba.conf): a password lost on the way is refused."""
    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
    hba = postgres_server.data_dir / "pg_hba.conf"
    hba.write_text(f"host {DATABASE} {ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute("SELECT pg_reload_conf()")
    return f"postgresql://{ROLE}:{PASSWORD}@{postgres_server.host}:{postgres_server.port}/{DATABASE}"


@pytest.fixture
def gateways(tmp_path: Path, dbos_worker, shared_journal: str) -> Iterator[list[CrashableGateway]]:
    started = gateway_pair(tmp_path, f"dbos+sqlite:///{dbos_worker.db}?poll=0.3",
                           shared_journal)
    try:
        yield started
    finally:
        for gw in started:
            gw.stop()
        for gw in started:
            assert PASSWORD not in gw.log.read_text(errors="replace"), gw.log


async def _pending(client: GatewayClient, wid: str, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id.endswith("/" + wid):
                return intr.id
        await asyncio.wait_for(client.updates(), timeout_s)
    raise AssertionError(f"no pending interrupt for {wid}")


async def _delivered_once(worker, wid: str) -> dict:
    """The workflow finished; the agent got exactly one message and logged one decision."""
    record = await settled_record(worker.db, wid)
    assert record.status == "SUCCESS", record
    assert len(record.sent) == 1 and record.sent[0]["consumed"], record.sent
    assert len(record.received) == 1, record.received
    decisions = [e for e in worker.exec_log(wid) if e["event"] == "decision"]
    assert len(decisions) == 1, decisions
    return record.received[0]


async def test_two_gateways_deciding_one_interrupt_deliver_once_and_one_gets_conflict(
        gateways: list[CrashableGateway], dbos_worker):
    a, b = gateways
    a.start()
    b.start()
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    async with GatewayClient(a.url, a.tokens["operator"]) as alice, \
            GatewayClient(b.url, b.tokens["operator"]) as bob:
        iid = await _pending(alice, wid)
        assert await _pending(bob, wid) == iid
        ra, rb = await asyncio.gather(
            alice.command("decide", [iid], decision=APPROVE, key="alice-on-a"),
            bob.command("decide", [iid], decision=APPROVE, key="bob-on-b"))
        results = {r[0].id: r[0] for r in (ra, rb)}
        assert sorted(r.outcome for r in results.values()) == ["applied", "conflict"], results
        winner = next(r for r in results.values() if r.outcome == "applied")
        loser = next(r for r in results.values() if r.outcome == "conflict")
        # the journal is shared: each gateway's audit shows both operators' commands
        for client in (alice, bob):
            audit = await client.query("audit", limit=20)
            assert {(e["command_id"], e["outcome"]) for e in audit if e["target"] == iid} == {
                (winner.id, "applied"), (loser.id, "conflict")}
        # a retry of the winner's key on the other gateway replays its result
        other = bob if winner.id == "alice-on-a" else alice
        again = await other.command("decide", [iid], decision=APPROVE, key=winner.id)
        assert again[0].outcome == "applied" and again[0].replayed
    received = await _delivered_once(dbos_worker, wid)
    assert received["type"] == "approve"


async def test_a_peer_adopts_the_intent_of_a_gateway_killed_after_it_and_delivers_once(
        gateways: list[CrashableGateway], dbos_worker):
    a, b = gateways
    b.start()
    a.start(crash_at="after_intent")
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    async with GatewayClient(a.url, a.tokens["operator"]) as alice:
        iid = await _pending(alice, wid)
        with pytest.raises(GatewayUnreachable):
            await alice.command("decide", [iid], decision=APPROVE, key="crash-on-a")
    assert a.process is not None
    a.process.wait(10)
    killed_at = time.monotonic()
    assert a.process.returncode == -signal.SIGKILL
    before = read_record(dbos_worker.db, wid)
    assert before.sent == [] and before.status == "PENDING", before  # journaled, not sent
    async with GatewayClient(b.url, b.tokens["operator"]) as bob:
        assert await _pending(bob, wid) == iid  # b has read the interrupt too (its own poll)
        # the claim is in the shared journal: the peer refuses a second decision, and a retry
        # of the dead gateway's key is in progress until the peer has adopted it
        other = await bob.command("decide", [iid], decision=APPROVE, key="bob-meanwhile")
        assert other[0].outcome == "conflict", other
        # a is not restarted: b adopts its intent once a's liveness lapsed (a few seconds)
        while not [e for e in dbos_worker.exec_log(wid) if e["event"] == "decision"]:
            assert time.monotonic() - killed_at < 20, "no peer re-drove the dead gateway's intent"
            await asyncio.sleep(0.2)
        took_s = time.monotonic() - killed_at
        audit = await bob.query("audit", limit=20)
    received = await _delivered_once(dbos_worker, wid)
    assert received["type"] == "approve"
    assert any(e["command_id"] == "crash-on-a" and e["outcome"] == "applied"
               and f"re-driven by gateway {b.owner} for gateway {a.owner}, which stopped"
               in e["detail"] for e in audit), audit
    assert took_s < 12, f"adopted after {took_s:.1f} s"


def test_a_journal_that_refuses_the_password_is_reported_without_it(
        tmp_path: Path, shared_journal: str):
    wrong = shared_journal.replace(PASSWORD, "Wrong-Pw-19d2")
    env = {**os.environ, "IRQ_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "console.cli.app", "serve", "--port", "0", "--journal", wrong,
         "--backend", f"dbos+sqlite:///{tmp_path / 'dbos.db'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "cannot open the journal at postgresql://irq_gateway:***@" in out, out
    assert "Wrong-Pw-19d2" not in out and PASSWORD not in out
