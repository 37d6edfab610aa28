"""Fixtures for the LangGraph adapter tests: a real ``langgraph dev`` Agent Server (one per
test module) serving the plain LangGraph / langchain graphs in ``graphs/``, the adapter as
the registry builds it, and a client of the server's own API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from langgraph_scenarios import ServerClient, start_agent_server

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.langgraph.adapter import LangGraphBackend
from backend_adapters.langgraph.dev_server import AgentServer
from backend_adapters.registry import open_backend


@pytest.fixture(scope="module")
def agent_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    """One real ``langgraph dev`` per test module (tests isolate by thread)."""
    server = start_agent_server(tmp_path_factory.mktemp("langgraph"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(agent_server: AgentServer) -> Iterator[ServerClient]:
    client = ServerClient(agent_server.url)
    yield client
    client.close()


@pytest.fixture
async def adapter(agent_server: AgentServer) -> AsyncIterator[LangGraphBackend]:
    """The adapter as ``irq serve --backend langgraph+http://...`` builds it."""
    backend = open_backend(agent_server.backend_url(verify_s=10), MemoryPauseLedger())
    assert isinstance(backend, LangGraphBackend)
    await backend.start()
    yield backend
    await backend.close()
