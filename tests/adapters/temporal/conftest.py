"""Fixtures for the Temporal adapter tests: a real dev server, real workers, the adapter."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.temporal.adapter import TemporalBackend
from backend_adapters.temporal.dev_server import DevServer
from devtools.temporal_sample_worker import WorkerProcess


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server shared by the Temporal tests (tests isolate by task queue)."""
    server = DevServer(tmp_path_factory.mktemp("temporal-shared"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_temporal_server(tmp_path: Path) -> Iterator[DevServer]:
    """A dev server only this test uses (it gets stopped, frozen and restarted)."""
    server = DevServer(tmp_path / "temporal")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def start_worker(
    temporal_server: DevServer, task_queue: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    workers: list[WorkerProcess] = []

    def start(identity: str = "", server: DevServer | None = None) -> WorkerProcess:
        worker = WorkerProcess(
            address=(server or temporal_server).address,
            task_queue=task_queue,
            identity=identity or f"worker-{len(workers) + 1}-{task_queue}",
            log_path=tmp_path / f"worker-{len(workers) + 1}.log",
        )
        worker.start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture
async def adapter(temporal_server: DevServer, task_queue: str) -> AsyncIterator[TemporalBackend]:
    """The adapter as the registry builds it, limited to this test's task queue."""
    backend = open_backend(
        temporal_server.backend_url(rps=100, query=f"TaskQueue='{task_queue}'", timeout=5),
        MemoryPauseLedger(),
    )
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    yield backend
    await backend.close()
