"""Two real ``irq serve`` processes on one PostgreSQL journal share the backend contexts by
lease (console/gateway/context_leases.py) and see one world (console/gateway/peering.py).

Gateway A starts alone and takes both contexts (``dbos:one`` with a real DBOS agent on SQLite
pushing its heartbeats to A, ``dbos:two`` with no database: unreachable); B joins and, by
fair share, takes ``dbos:two`` while A keeps ``dbos:one``. An operator connected to B sees
the run A observes, its heartbeats (pushed to A only) and its interrupt; the operator's
decision on B reaches the agent once. Then A is SIGKILLed: B holds both contexts once A's
leases lapse (after 3 s); restarted, A catches up from B's current state and
takes its share back. Nothing is mocked; the PostgreSQL server is the
``pgserver`` wheel's (tests/adapters/postgres_server.py), processes stop by their own pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_dbos_adapter import deploy, plan, step

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.model import Decision, DecisionKind, Role
from devtools.dbos_record import settled_record
from tests.adapters.conftest import DBOSWorker
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.support.crashable_gateway import CrashableGateway, gateway_pair, stop_cleanly

APPROVE = Decision(kind=DecisionKind.APPROVE)


@pytest.fixture
def two_gateways(tmp_path: Path, postgres_server: PostgresServer
                 ) -> Iterator[tuple[CrashableGateway, CrashableGateway, DBOSWorker]]:
    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute('CREATE DATABASE "leasing"')
    journal = postgres_server.url("leasing")
    root = tmp_path / "dbos-one"
    root.mkdir()
    backends = [f"dbos+sqlite:///{root / 'sys.db'}?context=one&poll=0.3",
                f"dbos+sqlite:///{tmp_path / 'absent' / 'sys.db'}?context=two&poll=0.3"]
    started = gateway_pair(tmp_path, backends, journal)
    a, b = started
    worker: DBOSWorker | None = None
    try:
        a.start()
        agent = create_token(Role.AGENT, "agent-one", a.home, scopes=["dbos:one"])
        worker = DBOSWorker(root=root, executor_id="w-one", queue="q-w-one", env={
            "IRQ_AGENT_URL": f"{a.url}/agent", "IRQ_AGENT_TOKEN": agent,
            "IRQ_AGENT_CONTEXT": "one"})
        worker.start()
        yield a, b, worker
    finally:
        if worker is not None:
            worker.stop()
        stop_cleanly(started)


async def _peers(client: GatewayClient) -> dict[str, Any]:
    stats = await client.query("stats")
    return dict(stats["peers"])


async def _until(what: str, check: Any, timeout_s: float = 60.0) -> Any:
    """Wait for ``check``; the timeout guards against a hang, it claims nothing about speed
    (how fast a context is taken over belongs in a benchmark)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.1)


async def test_contexts_are_leased_once_seen_everywhere_and_taken_over_after_a_kill(
        two_gateways: tuple[CrashableGateway, CrashableGateway, DBOSWorker]) -> None:
    a, b, worker = two_gateways
    async with GatewayClient(a.url, a.tokens["operator"]) as on_a:
        async def a_holds_both() -> bool:
            return set((await _peers(on_a))["held"]) == {"dbos:one", "dbos:two"}
        await _until("A alone holds both contexts", a_holds_both)
        b.start()

        async def split() -> bool:
            return (await _peers(on_a))["held"] == ["dbos:one"]
        await _until("A hands dbos:two over to B", split)

    wid = worker.enqueue(plan(step("prepare", 1.0), deploy(step("ship"))))
    run_id = f"dbos:one/{wid}"
    async with GatewayClient(b.url, b.tokens["operator"]) as bob:
        async def b_took_its_share() -> bool:  # at its next round after A released it
            return (await _peers(bob))["held"] == ["dbos:two"]
        await _until("B takes dbos:two", b_took_its_share)
        peers = await _peers(bob)
        assert {row["context"]: row["holder"] for row in peers["leases"]} == {
            "dbos:one": a.owner, "dbos:two": b.owner}

        async def beating() -> bool:  # observed by A, beats pushed to A, both seen on B
            await asyncio.wait_for(bob.updates(), 5)
            run = bob.view.runs.get(run_id)
            return run is not None and run.heartbeat_at is not None
        await _until("B shows A's run with the agent's heartbeats", beating)

        async def pending() -> str | None:
            await asyncio.wait_for(bob.updates(), 5)
            found = [i.id for i in bob.view.pending_interrupts() if i.run_id == run_id]
            return found[0] if found else None
        iid = await _until("B shows the interrupt", pending)
        seen = bob.view.runs[run_id].heartbeat_at

        async def beats_go_on() -> bool:  # the agent's next beats, pushed to A, reach B too
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(bob.updates(), 5)
            later = bob.view.runs[run_id].heartbeat_at
            return later is not None and seen is not None and later > seen
        await _until("B shows the agent's later heartbeats while it waits", beats_go_on)

        result = await bob.command("decide", [iid], decision=APPROVE, key="bob-on-b")
        assert result[0].outcome == "applied", result
        record = await settled_record(worker.db, wid)
        assert record.status == "SUCCESS", record
        assert len(record.sent) == 1 and len(record.received) == 1, record
        assert len([e for e in worker.exec_log(wid) if e["event"] == "decision"]) == 1

        assert a.process is not None
        os.kill(a.process.pid, signal.SIGKILL)
        a.process.wait(10)

        async def b_holds_both() -> bool:
            return set((await _peers(bob))["held"]) == {"dbos:one", "dbos:two"}
        await _until("B takes dbos:one over", b_holds_both)
        # B polls dbos:one itself now: the run is still there, decided
        wid2 = worker.enqueue(plan(step("prepare", 0.2), deploy(step("ship"))))

        async def new_run_seen() -> bool:
            await asyncio.wait_for(bob.updates(), 5)
            return f"dbos:one/{wid2}" in bob.view.runs
        await _until("B observes dbos:one on its own", new_run_seen)

    # A comes back: it catches up from B's current state (not from history) and gets its share
    a.start()
    async with GatewayClient(a.url, a.tokens["operator"]) as on_a:
        async def caught_up() -> bool:
            await asyncio.wait_for(on_a.updates(), 5)
            return {run_id, f"dbos:one/{wid2}"} <= set(on_a.view.runs)
        await _until("the restarted A shows the runs B observes", caught_up)

        async def rebalanced() -> bool:
            return (await _peers(on_a))["held"] == ["dbos:two"]
        await _until("A takes its share back", rebalanced)
