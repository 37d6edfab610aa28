"""The DBOS adapter against a real DBOS agent on a real PostgreSQL system database.

A private PostgreSQL server (postgres_server.py) holds the DBOS system database; a
``console.demo.dbos.worker`` process runs the demo agent on it (``--db postgresql://...``); the
adapter is opened from a ``dbos+postgresql://`` backend URL exactly as the gateway opens it.
The agent's execution log is the evidence for what ran and which decision it received.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import postgres_server as pg
import pytest
from test_dbos_adapter import (
    deploy,
    executions,
    observed,
    pending_interrupt,
    plan,
    retrying_until_a_step_after_the_recovery,
    run_where,
    step,
)

from backend_adapters.base import Conflict, MemoryPauseLedger
from backend_adapters.dbos.adapter import DBOSBackend
from backend_adapters.registry import open_backend
from console.model import Decision, DecisionKind, RunState
from devtools.postgres_server import packaged_install


def _adapters_conftest():
    """This directory's conftest.py, loaded by path: ``import conftest`` is ambiguous (every
    test directory has a conftest.py, and pytest keeps only the last one loaded under that
    name)."""
    name = "_dbos_adapters_conftest"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).with_name("conftest.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


postgres_server = pg.postgres_server  # the fixture (module scope): a private Postgres
_conftest = _adapters_conftest()
AGENT_TOKEN: str = _conftest.AGENT_TOKEN
DBOSWorker = _conftest.DBOSWorker


@dataclass
class PostgresWorker(DBOSWorker):
    """A demo worker whose system database is a Postgres URL (``--db URL``)."""

    database_url: str = ""

    @property
    def db(self) -> str:  # type: ignore[override]  # what the worker's --db gets
        return self.database_url

    @property
    def url(self) -> str:
        return self.database_url


@pytest.fixture(scope="module")
def pg_worker(
    postgres_server: pg.PostgresServer,
    agent_channel,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PostgresWorker]:
    worker = PostgresWorker(
        root=tmp_path_factory.mktemp("dbos-pg"),
        executor_id="w-pg",
        queue="q-w-pg",
        env={
            "IRQ_AGENT_URL": agent_channel.url,
            "IRQ_AGENT_TOKEN": AGENT_TOKEN,
            "IRQ_AGENT_CONTEXT": "local",
        },
        database_url=postgres_server.url(),
    )
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()  # by its pid


@pytest.fixture
async def backend(postgres_server: pg.PostgresServer, pg_worker) -> AsyncIterator[DBOSBackend]:
    # trust authentication ignores the password; the adapter must not show it
    url = postgres_server.url().replace("postgres@", "postgres:s3cret@", 1)
    b = open_backend(f"dbos+{url}?poll=0.5", MemoryPauseLedger())
    assert isinstance(b, DBOSBackend)
    await b.start()
    try:
        yield b
    finally:
        await b.close()


def test_postgres_server_is_the_one_the_project_installs(postgres_server: pg.PostgresServer):
    """The server under test runs from the binaries of the ``pgserver`` wheel that
    pyproject.toml pins (or the fixture's copy of them), never from a system installation."""
    exe = Path(os.readlink(f"/proc/{postgres_server.pid}/exe"))
    assert exe == postgres_server.bin_dir / "postgres"
    assert not exe.is_relative_to("/usr"), exe
    packaged = packaged_install() / "bin" / "postgres"
    assert exe.read_bytes() == packaged.read_bytes()
    version = subprocess.run(
        [str(packaged), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    with postgres_server.connect() as conn:
        row = conn.execute("SHOW server_version").fetchone()
    assert row is not None and row[0].split()[0] == version


async def test_postgres_run_interrupt_and_approval_delivered_once(
    backend, pg_worker, postgres_server, waiter
):
    # shown without the user and password the backend URL carries
    assert backend.url == f"postgresql://127.0.0.1:{postgres_server.port}/irq_dbos"
    wid = pg_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    interrupt = await pending_interrupt(backend, wid, waiter)
    run, interrupts = await observed(backend, wid)
    assert run is not None and run.id == f"dbos:local/{wid}"
    assert run.state is RunState.RUNNING and run.native_state == "PENDING"
    assert run.name == "test-agent" and run.interrupts == [interrupt.id]
    assert {(r.id, r.state) for r in run.resources} == {
        ("gpu-0/slice-1", "held"),
        ("lock/orders", "held"),
    }
    assert [i.native_id for i in interrupts] == [f"{wid}/1"]
    assert interrupt.title == "Deploy billing to prod?" and interrupt.action == "deploy"
    assert interrupt.args == {"service": "billing", "environment": "prod", "canary_percent": 10}
    # the workflow really lives in the Postgres system database
    with postgres_server.connect() as conn:
        row = conn.execute(
            "SELECT status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s",
            (wid,),
        ).fetchone()
    assert row == ("PENDING", "w-pg")

    approve = Decision(kind=DecisionKind.APPROVE)
    await backend.decide(interrupt, approve, idempotency_key="pg-1", identity="alice")
    # a retried command: on Postgres LISTEN/NOTIFY wakes the agent within milliseconds, so
    # the retry usually finds the interrupt already consumed (Conflict); if it wins the race,
    # DBOS drops the duplicate send (idempotency key = interrupt id). Either way: one decision.
    try:
        await backend.decide(interrupt, approve, idempotency_key="pg-1", identity="alice")
    except Conflict as err:
        assert "no longer pending" in err.message
    done = await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)
    assert done.native_state == "SUCCESS" and done.interrupts == []
    assert {r.state for r in done.resources} == {"released"}
    decisions = [e for e in pg_worker.exec_log(wid) if e["event"] == "decision"]
    assert len(decisions) == 1
    assert (decisions[0]["type"], decisions[0]["by"], decisions[0]["command_id"]) == (
        "approve",
        "alice",
        "pg-1",
    )
    assert [executions(pg_worker, wid, s) for s in ("prepare", "ship")] == [1, 1]
    assert [(s.name, s.status) for s in await backend.journal(wid)] == [
        ("prepare", "completed"),
        ("wait for decision", "completed"),
        ("record decision (approve)", "completed"),
        ("ship", "completed"),
    ]


async def test_postgres_pause_then_resume_continues(backend, pg_worker, waiter):
    wid = pg_worker.enqueue(plan(step("fetch"), step("train", 1.5), step("report")))
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "train")
    await backend.pause(wid, reason="GPU needed elsewhere", identity="alice")
    run = await backend.get_run(wid)
    assert run.state is RunState.PAUSED and run.native_state == "CANCELLED"
    run = await run_where(backend, wid, waiter, lambda r: r.details.get("agent_phase") == "paused")
    assert {r.id: r.state for r in run.resources} == {
        "gpu-0/slice-1": "held",  # on_pause=keep
        "lock/orders": "released",  # on_pause=release
    }
    seen, _ = await observed(backend, wid)
    assert seen is not None and seen.state is RunState.PAUSED
    assert executions(pg_worker, wid, "report") == 0

    await backend.resume(wid, reason="GPU free again", identity="alice")
    done = await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)
    assert done.native_state == "SUCCESS" and not done.preempted
    assert [executions(pg_worker, wid, s) for s in ("fetch", "train", "report")] == [
        1,  # journaled: replayed, not re-run
        2,  # in flight at the pause: runs again
        1,
    ]
    assert Path(pg_worker.board).is_dir()
    assert not any(wid in p.read_text() for p in Path(pg_worker.board).iterdir() if p.is_file())


async def test_postgres_progress_since_dispatch_is_read_with_the_same_query(
    backend, pg_worker, waiter
):
    """The ``retrying`` rule's query (a step started after the workflow's latest dispatch,
    queue_health.py) runs on PostgreSQL too, where the dispatch time is the database's clock
    and a step's the worker's: a run past its first step has one, an unknown id none."""
    from backend_adapters.dbos.system_tables import stepped_since_dispatch

    wid = pg_worker.enqueue(plan(step("fetch"), step("train", 1.5)))
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "train")
    database = backend._database
    stepped = await database.call(
        lambda: stepped_since_dispatch(database.connected(), [wid, "no-such-workflow"]))
    assert stepped == {wid}
    await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)


async def test_postgres_a_recovered_run_is_retrying_until_a_step_after_the_recovery(
    backend, pg_worker, waiter
):
    """The same SIGKILL and recovery as on SQLite, on PostgreSQL: the dispatch time is the
    database's clock (``started_at_epoch_ms``), a step's start the worker's. The worker is
    started again (same executor id), so the module's later tests keep their worker."""
    await retrying_until_a_step_after_the_recovery(backend, pg_worker, waiter)
