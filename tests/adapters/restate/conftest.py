"""Fixtures for the Restate adapter tests: a real ``restate-server`` (npm, one per test
module) on free loopback ports, the plain restate-sdk services of ``services.py`` under
hypercorn, registered with ``POST /deployments``, and the adapter as the registry builds it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from restate_scenarios import HERE, RestateStack

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.restate.adapter import RestateBackend
from backend_adapters.restate.dev_server import HypercornService, RestateServer


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RestateStack]:
    """``RESTATE_APP`` of the test module picks the app (default ``services:app``)."""
    tmp = tmp_path_factory.mktemp("restate")
    steps_file = tmp / "steps.log"
    server = RestateServer(base_dir=tmp / "server")
    server.start()
    service = HypercornService(
        app=getattr(request.module, "RESTATE_APP", "services:app"),
        cwd=HERE,
        log=tmp / "service.log",
        env={"IRQ_RESTATE_STEPS": str(steps_file)},
    )
    try:
        service.start()
        server.register(service.url)
        yield RestateStack(server=server, service=service, steps_file=steps_file)
    finally:
        service.stop()
        server.stop()


@pytest.fixture
async def adapter(stack: RestateStack) -> AsyncIterator[RestateBackend]:
    """The adapter as ``irq serve --backend restate+http://...`` builds it."""
    backend = open_backend(stack.server.backend_url(), MemoryPauseLedger())
    assert isinstance(backend, RestateBackend)
    await backend.start()
    yield backend
    await backend.close()
