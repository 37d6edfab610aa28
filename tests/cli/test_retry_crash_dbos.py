"""A retry survives a gateway killed in the middle of it, on a real DBOS worker (SQLite).

The gateway is the test-only entry point tests/support/faulty_gateway.py, which SIGKILLs its
own pid at a named point of the command: ``after_intent`` (the intent is journaled, DBOS not
called yet) or ``before_outcome`` (DBOS forked, the journal does not know). Restarted as
``irq serve`` on the same journal, it re-drives the intent under the same key: DBOS holds
exactly one fork of the failed run, the pipeline's third step ran exactly twice in all (the
first two once; counted by the worker, outside the engine), the audit says the retry was
re-driven, and the same key again is a replay that names the fork and ``--wait`` follows it.

One worker for the module (three-step pipelines that fail while a flag file exists); a
fresh gateway home for each test.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_harness import Outcome, irq, start_retry_agent
from test_retry_dbos import eventually, step_counts

from console.processes import stop_process
from tests.support.crashable_gateway import CrashableGateway

pytestmark = [pytest.mark.slow]


@dataclass
class Worker:
    db: Path
    work: Path

    def forks(self, native_id: str) -> list[tuple[str, str]]:
        """(id, status) of every DBOS workflow forked from ``native_id``."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10) as conn:
            return conn.execute("SELECT workflow_uuid, status FROM workflow_status WHERE"
                                " forked_from = ?", (native_id,)).fetchall()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    work = tmp_path_factory.mktemp("retry-crash-work")
    (work / "fail").touch()
    db = work / "agent.db"
    agent, log = start_retry_agent(db, work, 2)
    try:
        eventually(lambda: (work / "counts").exists() and all(
            step_counts(work / "counts", f"pipeline-{n}").get("publish") == 1
            for n in (1, 2)) or agent.poll() is not None, "both pipelines to fail")
        assert agent.poll() is None, (work / "agent.log").read_text()
        (work / "fail").unlink()  # the warehouse is fixed: a retry's publish succeeds
        yield Worker(db, work)
    finally:
        stop_process(agent)
        log.close()


@pytest.mark.parametrize(("crash_at", "pipeline", "forks_at_crash"), [
    ("after_intent", "pipeline-1", 0),
    ("before_outcome", "pipeline-2", 1),
])
def test_a_gateway_killed_mid_retry_forks_once_after_its_restart(
        worker: Worker, tmp_path: Path, crash_at: str, pipeline: str,
        forks_at_crash: int) -> None:
    from console.demo.launcher import dbos_backend_url

    run_id = f"dbos:local/{pipeline}"
    key = f"crash-{crash_at}"
    home = tmp_path / "home"
    home.mkdir()
    gateway = CrashableGateway(home, dbos_backend_url(worker.db) + "?poll=0.3")
    env = {"IRQ_URL": gateway.url, "IRQ_TOKEN": gateway.tokens["operator"],
           "IRQ_HOME": str(home)}

    def state() -> str | None:
        out = irq("runs", "-o", "json", env=env)
        runs = {r["id"]: r for r in json.loads(out.stdout)} if out.code == 0 else {}
        return runs.get(run_id, {}).get("state")

    try:
        gateway.start(crash_at=crash_at)
        eventually(lambda: state() == "failed", f"{run_id} failed in the gateway", 30)
        killed = irq("retry", run_id, "--yes", "--key", key, "--reason", "warehouse fixed",
                     env=env)
        assert killed.code != 0, killed.stdout  # the gateway died under the command
        assert gateway.process is not None
        assert gateway.process.wait(10) == -signal.SIGKILL
        assert len(worker.forks(pipeline)) == forks_at_crash

        gateway.start()  # irq serve on the same journal: recovery re-drives the intent
        (fork_id, _), = eventually(
            lambda: [f for f in worker.forks(pipeline) if f[1] == "SUCCESS"],
            "the fork to complete", 60)
        assert len(worker.forks(pipeline)) == 1
        assert step_counts(worker.work / "counts", pipeline) == {
            "fetch_data": 1, "transform": 1, "publish": 2}

        # the same key again: the journal's result, naming the fork; --wait follows it
        def replayed() -> Outcome | None:
            out = irq("retry", run_id, "--yes", "--key", key, "--wait", "30", "-o", "json",
                      env=env)
            # the restarted gateway records the re-driven retry's outcome once it has read the
            # fork back, which can be after the fork completed: until then the key's command
            # answers in_progress, which says to ask again
            return None if "in_progress" in out.stdout + out.stderr else out

        again = eventually(replayed, "the re-driven retry's recorded outcome", 30)
        assert again.code == 0, again.stdout + again.stderr
        body = json.loads(again.stdout)
        (result,) = body["results"]
        assert result["replayed"] and result["outcome"] == "applied"
        assert result["new_run_id"] == f"dbos:local/{fork_id}"
        assert body["waited"][0]["target"] == result["new_run_id"] and body["waited"][0]["ok"]
        assert len(worker.forks(pipeline)) == 1

        audit = irq("audit", "--target", run_id, "-o", "json", env=env)
        assert audit.code == 0, audit.stderr
        (entry,) = [e for e in json.loads(audit.stdout) if e["outcome"] == "applied"]
        assert entry["action"] == "retry" and entry["reason"] == "warehouse fixed"
        assert "re-driven after a gateway restart" in entry["detail"]
    finally:
        gateway.stop()
