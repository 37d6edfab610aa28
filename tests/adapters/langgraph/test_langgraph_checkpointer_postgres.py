"""Checkpointer mode on PostgreSQL: a graph run in another process writes its checkpoints to a
real PostgreSQL server (the project's own, tests/adapters/postgres_server.py) with
``PostgresSaver`` and stops at interrupt(); irq's adapter, built by ``open_backend`` from a
``langgraph+postgresql://`` URL whose password comes from ``password_env=``, lists the thread
as waiting with its interrupt and decides it through the graph named in the URL. What arrived
is checked by reading the database again with a fresh saver (not through irq)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend_adapters.base import (
    BackendURLError,
    Conflict,
    MemoryPauseLedger,
    Unreachable,
    Unsupported,
)
from backend_adapters.langgraph.checkpointer import CheckpointerBackend
from backend_adapters.registry import open_backend
from console.model import Decision, DecisionKind, RunState
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.unit.test_backend_conformance import conformance_problems

GRAPH_FILE = Path(__file__).parent / "graphs" / "inbox_graph.py"
DATABASE = "irq_langgraph"
READER = "irq_reader"  # the role irq connects as: password authentication, not trust
PASSWORD = "s3cret/with:odd@chars"

AGENT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {graphs!r})
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.types import Command
    import inbox_graph

    with PostgresSaver.from_conn_string({url!r}) as saver:
        saver.setup()  # the graph's own process creates the tables, never irq
        graph = inbox_graph.builder.compile(checkpointer=saver)
        for tid in ("a", "b", "c"):
            graph.invoke({{"allow": {{}}}}, {{"configurable": {{"thread_id": tid}}}})
        graph.invoke(Command(resume=[{{"type": "ignore", "args": None}}]),
                     {{"configurable": {{"thread_id": "c"}}}})
    """
)


def values_of(url: str, tid: str) -> dict[str, Any]:
    """The thread's values, read with a fresh saver and the graph (not through irq)."""
    sys.path.insert(0, str(GRAPH_FILE.parent))
    try:
        import inbox_graph
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as saver:
            graph = inbox_graph.builder.compile(checkpointer=saver)
            return dict(graph.get_state({"configurable": {"thread_id": tid}}).values)
    finally:
        sys.path.remove(str(GRAPH_FILE.parent))


@pytest.fixture(scope="module")
def checkpoints(postgres_server: PostgresServer) -> Iterator[str]:
    """A database written by a graph run in a separate process: threads a and b stop at
    interrupt(), c is answered and finished. Yields irq's URL of it: the role ``READER``,
    which the server authenticates by password (a rule put first in this throw-away server's
    pg_hba.conf), so a password lost on the way is a refused connection."""
    with postgres_server.connect(autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")
        conn.execute(f"CREATE ROLE {READER} LOGIN PASSWORD '{PASSWORD}'")
    hba = postgres_server.data_dir / "pg_hba.conf"
    rule = f"host {DATABASE} {READER} 127.0.0.1/32 scram-sha-256\n"
    hba.write_text(rule + hba.read_text())  # first matching rule wins
    with postgres_server.connect(autocommit=True) as conn:
        conn.execute("SELECT pg_reload_conf()")
    url = postgres_server.url(DATABASE)
    done = subprocess.run(
        [sys.executable, "-c", AGENT.format(graphs=str(GRAPH_FILE.parent), url=url)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with postgres_server.connect(DATABASE, autocommit=True) as conn:
        conn.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {READER}")
    yield url.replace(f"{postgres_server.user}@", f"{READER}@", 1)


async def test_postgres_checkpointer_threads_are_observed_and_decided_once(
    checkpoints: str, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = postgres_server.url(DATABASE)  # the graph's own URL (trust), to check with
    monkeypatch.setenv("IRQ_TEST_PGPASS", PASSWORD)
    raw = f"langgraph+{checkpoints}?graph={GRAPH_FILE}:graph&password_env=IRQ_TEST_PGPASS"
    backend = open_backend(raw, MemoryPauseLedger())
    assert isinstance(backend, CheckpointerBackend)
    assert conformance_problems(type(backend), backend) == []
    assert backend.url == f"postgresql://127.0.0.1:{postgres_server.port}/{DATABASE}"
    await backend.start()
    try:
        observation = await backend.observe()
        states = {r.native_id: r.state for r in observation.runs}
        assert states == {"a": RunState.WAITING, "b": RunState.WAITING, "c": RunState.COMPLETED}
        assert {r.checkpointer for r in observation.runs} == {"postgres"}
        assert all(PASSWORD not in r.model_dump_json() for r in observation.runs)
        by_thread = {i.run_id.rsplit("/", 1)[1]: i for i in observation.interrupts}
        assert set(by_thread) == {"a", "b"}
        a = by_thread["a"]
        assert a.action == "send_email" and a.title == "Send this email?"

        outcome = await backend.decide(
            a, Decision(kind=DecisionKind.APPROVE), idempotency_key="k1", identity="ann"
        )
        assert "the graph stopped or finished" in outcome.detail
        values = values_of(written, "a")
        assert values["response"] == {"type": "accept", "args": None}
        assert values["log"] == ["draft", "review", "act"]  # review ran past interrupt once

        with pytest.raises(Conflict, match=r"already decided \(approve by ann\)"):
            await backend.decide(a, Decision(kind=DecisionKind.REJECT), idempotency_key="k2",
                                 identity="bob")
        again = await backend.decide(
            a, Decision(kind=DecisionKind.APPROVE), idempotency_key="k1", identity="ann"
        )
        assert again.detail.startswith("already delivered")
        assert values_of(written, "a")["log"] == ["draft", "review", "act"]
        assert "response" not in values_of(written, "b")  # nothing reached b

        steps = await backend.journal("a")
        review = next(s for s in steps if s.name == "review")
        assert "received approve by ann" in review.detail
        assert (await backend.get_run("a")).state is RunState.COMPLETED
        assert (await backend.get_run("b")).state is RunState.WAITING
        with pytest.raises(Unsupported):
            await backend.pause("b", reason="", identity="ann")
    finally:
        await backend.close()


async def test_postgres_checkpointer_url_errors_are_clear(
    checkpoints: str, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = f"graph={GRAPH_FILE}:graph"
    monkeypatch.delenv("IRQ_TEST_UNSET", raising=False)
    with pytest.raises(BackendURLError, match="IRQ_TEST_UNSET is not set"):
        open_backend(f"langgraph+{checkpoints}?{graph}&password_env=IRQ_TEST_UNSET",
                     MemoryPauseLedger())
    nouser = checkpoints.replace(f"{READER}@", "", 1)
    monkeypatch.setenv("IRQ_TEST_PGPASS", PASSWORD)
    with pytest.raises(BackendURLError, match="need a user"):
        open_backend(f"langgraph+{nouser}?{graph}&password_env=IRQ_TEST_PGPASS",
                     MemoryPauseLedger())
    with pytest.raises(BackendURLError, match="needs graph="):
        open_backend(f"langgraph+{checkpoints}", MemoryPauseLedger())
    monkeypatch.setenv("IRQ_TEST_PGPASS", "wrong")
    wrong = open_backend(f"langgraph+{checkpoints}?{graph}&password_env=IRQ_TEST_PGPASS",
                         MemoryPauseLedger())
    try:
        with pytest.raises(Unreachable, match="password authentication failed"):
            await wrong.observe()
    finally:
        await wrong.close()
    # a database the graph never wrote to: no checkpoint tables, and irq does not create them
    with postgres_server.connect(autocommit=True) as conn:
        conn.execute("CREATE DATABASE irq_langgraph_empty")
    empty = open_backend(
        f"langgraph+{postgres_server.url('irq_langgraph_empty')}?{graph}", MemoryPauseLedger()
    )
    try:
        with pytest.raises(Unreachable, match="checkpoints"):
            await empty.observe()
    finally:
        await empty.close()
