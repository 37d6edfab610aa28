"""Checkpointer mode: a thread that failed in its own process (a plain graph on a SQLite
checkpointer) shows the node that raised, and a retry forks it in the gateway process from
the checkpoint before that node: the first nodes' side effects are not repeated."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend
from console.model import RunState

GRAPH_FILE = Path(__file__).parent / "graphs" / "flaky_graph.py"

AGENT = textwrap.dedent(
    """
    import sqlite3, sys
    sys.path.insert(0, {graphs!r})
    from langgraph.checkpoint.sqlite import SqliteSaver
    import flaky_graph

    saver = SqliteSaver(sqlite3.connect({db!r}, check_same_thread=False))
    graph = flaky_graph.builder.compile(checkpointer=saver)
    try:
        graph.invoke({{"workdir": {workdir!r}}}, {{"configurable": {{"thread_id": "t1"}}}})
    except ConnectionError:
        pass
    """
)


async def test_a_failed_thread_is_retried_from_the_failed_node(tmp_path: Path):
    db = tmp_path / "checkpoints.sqlite"
    (tmp_path / "outage.flag").touch()
    script = AGENT.format(graphs=str(GRAPH_FILE.parent), db=str(db), workdir=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    backend = open_backend(f"langgraph+sqlite:///{db}?graph={GRAPH_FILE}:graph",
                           MemoryPauseLedger())
    await backend.start()
    try:
        run = await backend.get_run("t1")
        assert run.state is RunState.FAILED and run.error is not None
        assert (run.error.step, run.error.type) == ("notify", "ConnectionError")
        plan = await backend.retry_plan("t1", from_step=None)
        assert (plan.steps_kept, plan.will_rerun) == (["fetch", "charge"], ["notify"])

        (tmp_path / "outage.flag").unlink()
        await backend.retry("t1", from_step=None, request_id="c1", reason="fixed", identity="ann")
        assert (await backend.get_run("t1")).state is RunState.COMPLETED
        again = await backend.retry("t1", from_step=None, request_id="c1", reason="", identity="a")
        assert again.detail.startswith("already retried")
        effects = Counter((tmp_path / "effects.log").read_text().split())
        assert effects == Counter(fetch=1, charge=1, notify=2)
    finally:
        await backend.close()
