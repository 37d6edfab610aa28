"""DBOS alert facts from the system database: work enqueued on a queue that no process
listens on raises ``no_workers`` (a DBOS process that serves other queues is running), and
it clears once a worker registers the queue and takes the work. The workers are written as
DBOS's queue examples write them (``plain_queue_worker.py``, no irq imports)."""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import DBOSClient

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.dbos.adapter import DBOSBackend
from backend_adapters.dbos.queue_health import recovery_retry
from backend_adapters.registry import open_backend
from console.alert_model import AlertKind, Condition
from console.processes import ChildProcess

WORKER = Path(__file__).with_name("plain_queue_worker.py")
REPO = Path(__file__).resolve().parents[2]


def start_worker(db: Path, log: Path, *queues: str) -> ChildProcess:
    worker = ChildProcess(
        f"queue-worker-{log.stem}",
        [sys.executable, str(WORKER), str(db), *queues],
        log,
        env={"PYTHONPATH": str(REPO)},
    )
    worker.start()
    deadline = time.monotonic() + 60
    while "ready" not in (log.read_text(errors="replace") if log.exists() else ""):
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    return worker


@pytest.fixture(scope="module")
def front_end(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A DBOS process that serves no queue (it creates the system database)."""
    root = tmp_path_factory.mktemp("dbos-queues")
    db = root / "sys.db"
    process = start_worker(db, root / "front.log")
    try:
        yield db
    finally:
        process.stop()


async def no_workers(backend: DBOSBackend, subject: str) -> Condition | None:
    conditions = (await backend.observe()).conditions
    return next((c for c in conditions if c.subject == subject), None)


async def test_enqueued_work_nobody_takes_raises_no_workers_until_a_worker_listens(
    front_end: Path,
):
    client = DBOSClient(system_database_url=f"sqlite:///{front_end}")
    handle = client.enqueue(
        {"queue_name": "reports", "workflow_name": "make_report", "app_version": "reports-1"},
        "q3",
    )
    backend = open_backend(f"dbos+sqlite:///{front_end}?no_workers_s=1", MemoryPauseLedger())
    assert isinstance(backend, DBOSBackend)
    await backend.start()
    subject = f"dbos:{backend.context}/queue/reports"
    worker = None
    try:
        deadline = time.monotonic() + 30
        while (condition := await no_workers(backend, subject)) is None:
            assert time.monotonic() < deadline, "no no_workers condition for queue reports"
            await asyncio.sleep(0.3)
        assert condition.kind is AlertKind.NO_WORKERS
        assert condition.facts["oldest_workflow"] == handle.workflow_id
        assert "reports-1" in condition.action and condition.since is not None

        worker = start_worker(front_end, front_end.with_name("reports.log"), "reports")
        assert client.retrieve_workflow(handle.workflow_id).get_result() == "q3: 44"
        assert await no_workers(backend, subject) is None
        # a recovered run is DBOS's form of retrying (same row, as if dispatched three times)
        done = client.list_workflows(workflow_ids=[handle.workflow_id])[0]
        assert recovery_retry(done) is None
        recovered = copy.copy(done)
        recovered.status, recovered.recovery_attempts = "PENDING", 3
        again = recovery_retry(recovered)
        assert again is not None and again.attempt == 3 and again.step == "make_report"
    finally:
        if worker is not None:
            worker.stop()
        await backend.close()
        client.destroy()


async def test_a_burst_of_finished_runs_larger_than_a_page_is_read_whole(front_end: Path):
    """Runs finishing faster than one page per poll (``finished_limit``) are all reported:
    the watermark moves to the newest completion, so an unread rest would be lost for good."""
    client = DBOSClient(system_database_url=f"sqlite:///{front_end}")
    worker = start_worker(front_end, front_end.with_name("burst.log"), "burst")
    try:
        handles = [client.enqueue({"queue_name": "burst", "workflow_name": "make_report"},
                                  f"b{i}") for i in range(12)]
        for handle in handles:
            assert client.retrieve_workflow(handle.workflow_id).get_result().startswith("b")
        backend = open_backend(f"dbos+sqlite:///{front_end}?finished_limit=5",
                               MemoryPauseLedger())
        await backend.start()
        try:
            seen = {run.native_id for run in (await backend.observe()).runs}
        finally:
            await backend.close()
        assert {h.workflow_id for h in handles} <= seen
    finally:
        worker.stop()
        client.destroy()
