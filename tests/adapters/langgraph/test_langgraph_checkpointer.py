"""Checkpointer mode against a real SQLite checkpointer written by another process: threads
and pending interrupts read straight from the file, decisions resumed through the graph named
in the URL, checked by reading the file again with a fresh saver (not through irq)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backend_adapters.base import Conflict, MemoryPauseLedger, NotFound, Unsupported
from backend_adapters.langgraph.checkpointer import CheckpointerBackend
from backend_adapters.registry import open_backend
from console.model import Decision, DecisionKind, RunState
from tests.unit.test_backend_conformance import conformance_problems

GRAPH_FILE = Path(__file__).parent / "graphs" / "inbox_graph.py"

AGENT = textwrap.dedent(
    """
    import sqlite3, sys
    sys.path.insert(0, {graphs!r})
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command
    import inbox_graph

    saver = SqliteSaver(sqlite3.connect({db!r}, check_same_thread=False))
    graph = inbox_graph.builder.compile(checkpointer=saver)
    for tid in ("a", "b", "c"):
        graph.invoke({{"allow": {{}}}}, {{"configurable": {{"thread_id": tid}}}})
    graph.invoke(Command(resume=[{{"type": "ignore", "args": None}}]), {{"configurable": {{"thread_id": "c"}}}})
    """
)


def values_of(db: Path, tid: str) -> dict:
    """The thread's values, read with a fresh saver and the graph (not through irq)."""
    sys.path.insert(0, str(GRAPH_FILE.parent))
    try:
        import inbox_graph
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(str(db), check_same_thread=False))
        graph = inbox_graph.builder.compile(checkpointer=saver)
        return dict(graph.get_state({"configurable": {"thread_id": tid}}).values)
    finally:
        sys.path.remove(str(GRAPH_FILE.parent))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "checkpoints.sqlite"
    done = subprocess.run(
        [sys.executable, "-c", AGENT.format(graphs=str(GRAPH_FILE.parent), db=str(path))],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return path


async def test_checkpointer_threads_are_observed_and_decided_through_the_graph(db: Path):
    backend = open_backend(
        f"langgraph+sqlite:///{db}?graph={GRAPH_FILE}:graph", MemoryPauseLedger()
    )
    assert isinstance(backend, CheckpointerBackend)
    assert conformance_problems(type(backend), backend) == []
    await backend.start()
    try:
        observation = await backend.observe()
        states = {r.native_id: r.state for r in observation.runs}
        assert states == {"a": RunState.WAITING, "b": RunState.WAITING, "c": RunState.COMPLETED}
        assert {r.checkpointer for r in observation.runs} == {"sqlite"}
        by_thread = {i.run_id.rsplit("/", 1)[1]: i for i in observation.interrupts}
        assert set(by_thread) == {"a", "b"}
        a = by_thread["a"]
        assert a.action == "send_email" and a.title == "Send this email?"

        edited = {"to": "bob@example.com", "body": "hello"}
        outcome = await backend.decide(
            a, Decision(kind=DecisionKind.EDIT, args=edited), idempotency_key="k1", identity="ann"
        )
        assert "the graph stopped or finished" in outcome.detail
        values = values_of(db, "a")
        assert values["response"] == {"type": "edit", "args": {"action": "send_email", "args": edited}}
        assert values["log"] == ["draft", "review", "act"]

        with pytest.raises(Conflict, match=r"already decided \(edit by ann\)"):
            await backend.decide(a, Decision(kind=DecisionKind.APPROVE), idempotency_key="k2",
                                 identity="bob")
        again = await backend.decide(
            a, Decision(kind=DecisionKind.EDIT, args=edited), idempotency_key="k1", identity="ann"
        )
        assert again.detail.startswith("already delivered")
        stale = by_thread["b"].model_copy(update={"native_id": "f" * 32})
        with pytest.raises(NotFound, match="pending now: " + by_thread["b"].native_id):
            await backend.decide(stale, Decision(kind=DecisionKind.APPROVE), idempotency_key="k3",
                                 identity="ann")
        assert "response" not in values_of(db, "b")  # nothing reached b

        steps = await backend.journal("a")
        review = next(s for s in steps if s.name == "review")
        assert "received edit by ann" in review.detail
        assert (await backend.get_run("a")).state is RunState.COMPLETED
        with pytest.raises(Unsupported):
            await backend.pause("b", reason="", identity="ann")
    finally:
        await backend.close()
