"""The demo fleet supervisor: real agents, a preemption with recovery, a clean stop by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dbos import DBOSClient

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend
from console.model import Decision, DecisionKind, InterruptKind, RunState
from console.processes import pid_alive

ROOT = Path(__file__).resolve().parents[2]


def start_fleet(db: Path, output: Path, agent_url: str, *args: str) -> subprocess.Popen[bytes]:
    """``python -m console.demo.dbos.fleet --db DB ARGS`` beating to ``agent_url``."""
    with output.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "console.demo.dbos.fleet", "--db", str(db), *args],
            cwd=ROOT,
            env={**os.environ, "IRQ_AGENT_URL": agent_url, "IRQ_AGENT_TOKEN": "t"},
            stdout=out,
            stderr=out,
        )


async def test_fleet_runs_agents_preempts_a_worker_and_stops_its_children(
    tmp_path, agent_channel, waiter
):
    db, output = tmp_path / "fleet.db", tmp_path / "fleet.out"
    fleet = start_fleet(db, output, agent_channel.url, "--agents", "8", "--workers", "2",
                        "--preempt-every", "7", "--downtime", "2", "--step-scale", "0.3")
    backend = None
    try:
        await waiter(lambda: db.exists(), timeout_s=20)
        backend = open_backend(f"dbos+sqlite:///{db}", MemoryPauseLedger())
        await waiter(_started(backend))

        async def lanes():
            runs = (await backend.observe()).runs
            return runs if len({r.native_id.rsplit("-", 1)[0] for r in runs}) >= 8 else None

        runs = await waiter(lanes, timeout_s=25)
        assert {r.details["app_version"] for r in runs} == {"irq-demo-1"}
        kinds = {r.native_id.split("-")[0] for r in runs}
        assert {"release", "outreach", "db", "research"} <= kinds

        async def recovered():
            return [r for r in (await backend.observe()).runs if r.preempted]

        await waiter(recovered, timeout_s=30, interval_s=0.5)
        assert b"preempted demo-worker-1 (SIGKILL" in output.read_bytes()
        beating = {f["native_id"] for f in agent_channel.frames if f.get("type") == "heartbeat"}
        assert len(beating) >= 8
    finally:
        if backend is not None:
            await backend.close()
        text = output.read_text(errors="replace")
        workers = [int(line.split("(pid ")[1].split(")")[0]) for line in text.splitlines()
                   if line.startswith("[fleet] started")]  # fmt: skip
        os.kill(fleet.pid, signal.SIGTERM)
        fleet.wait(20)
    assert fleet.returncode == 0
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers and not any(pid_alive(pid) for pid in workers)


async def test_the_showcase_keeps_a_purchase_approval_waiting_in_its_own_recv(
    tmp_path, agent_channel, waiter
):
    """A plain DBOS workflow (no irq import) waits in DBOS.recv: irq lists it as a
    ``message`` wait, an approve is the message, the order is placed, and the fleet starts
    the next approval."""
    db, output = tmp_path / "fleet.db", tmp_path / "fleet.out"
    fleet = start_fleet(db, output, agent_channel.url, "--agents", "1", "--workers", "1",
                        "--preempt-every", "0", "--step-scale", "0.3", "--showcase",
                        "--approval-rest", "0.5")
    backend = None
    try:
        await waiter(lambda: db.exists(), timeout_s=20)
        backend = open_backend(f"dbos+sqlite:///{db}", MemoryPauseLedger())
        await waiter(_started(backend))

        async def waiting(native_id):
            observation = await backend.observe()
            return next((i for i in observation.interrupts if i.run_id.endswith(native_id)),
                        None)

        first = await waiter(lambda: waiting("purchase-approval-0001"), timeout_s=30)
        assert first.kind is InterruptKind.MESSAGE
        assert first.title == "purchase_approval waits for a message (DBOS.recv)"
        assert [(h.name, h.kind) for h in first.handlers] == [("approval", "topic")]
        await backend.decide(first, Decision(kind=DecisionKind.APPROVE),
                             idempotency_key="demo-approve-1", identity="alice")

        async def finished():
            run = await backend.get_run("purchase-approval-0001")
            return run if run.state is RunState.COMPLETED else None

        await waiter(finished, timeout_s=20)
        client = DBOSClient(system_database_url=f"sqlite:///{db}")
        try:
            result = client.retrieve_workflow("purchase-approval-0001").get_result()
        finally:
            client.destroy()
        assert result["approved"] is True
        assert result["outcome"] == ("order for training cluster for ranking-v7 placed with "
                                     "gpu-cloud.example")
        nxt = await waiter(lambda: waiting("purchase-approval-0002"), timeout_s=30)
        assert nxt.kind is InterruptKind.MESSAGE
    finally:
        if backend is not None:
            await backend.close()
        os.kill(fleet.pid, signal.SIGTERM)
        fleet.wait(20)
    assert fleet.returncode == 0


def _started(backend):
    async def probe():
        try:
            await backend.start()
        except Exception:
            return False
        return True

    return probe
