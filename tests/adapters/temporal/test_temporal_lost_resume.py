"""Resume of a lost Temporal run, through the gateway's command executor (real dev server,
real worker killed with SIGKILL).

The operator resumes a run whose worker died: the plan says what will be done (a reset of the
activity waiting for its retry, not an unpause of nothing), the executor calls the adapter
with ``lost=True``, and the activity really runs again as attempt 1 from its last heartbeat
details once a new worker polls. A run whose activity had no retry left is refused with the
reason.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from temporal_scenarios import train_params, wait_run

from backend_adapters.temporal.adapter import TemporalBackend
from console.gateway.auth import Principal
from console.gateway.commands import CommandExecutor
from console.gateway.hub import Hub
from console.gateway.journal import Journal
from console.gateway.protocol import Command
from console.model import Action, Role, RunState


def agent_records(tmp_path: Path, wid: str) -> list[dict[str, Any]]:
    path = tmp_path / "agent-report.jsonl"
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["wf"] == wid]


async def wait_agent_start(tmp_path: Path, wid: str, count: int, timeout: float = 30.0) -> dict:
    """The agent's own record of its ``count``-th start of ``wid``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        starts = [r for r in agent_records(tmp_path, wid) if r["event"] == "started"]
        if len(starts) >= count:
            return starts[count - 1]
        await asyncio.sleep(0.1)
    raise AssertionError(f"{wid}: no start #{count}; agent log: {agent_records(tmp_path, wid)}")


async def test_resume_of_a_lost_run_resets_the_waiting_activity_and_says_so(
    adapter: TemporalBackend, temporal_server, start_worker, task_queue, tmp_path
) -> None:
    worker = start_worker()
    temporal_server.start_workflow(
        "lost-retry", "TrainAgent", task_queue, train_params(tmp_path, "r")
    )
    temporal_server.start_workflow(
        "lost-once", "TrainAgent", task_queue, train_params(tmp_path, "o", maximum_attempts=1)
    )
    adapter.focus({"lost-retry", "lost-once"})
    for wid in ("lost-retry", "lost-once"):
        await wait_run(adapter, wid, lambda r: (r.progress or 0) > 0.005)
    worker.kill()
    # lost as the server records it: the heartbeat timeout fired, no attempt runs
    await wait_run(adapter, "lost-retry", lambda r: r.state is RunState.LOST, timeout=30)
    await wait_run(adapter, "lost-once", lambda r: r.state is RunState.LOST, timeout=30)
    before = await adapter.get_run("lost-retry")
    assert before.attempt == 2  # the server moved on to attempt 2, waiting for a worker

    hub = Hub()
    hub.observe_runs((await adapter.observe()).runs)
    journal = Journal(tmp_path / "journal.db")
    executor = CommandExecutor(hub, journal, {f"temporal:{adapter.context}": adapter})
    who = Principal(identity="alice", role=Role.OPERATOR)
    rid = f"temporal:{adapter.context}/lost-retry"
    assert hub.runs[rid].state is RunState.LOST

    # the plan says what resume does to a lost run: reset, not "unpause each paused activity"
    the_plan = executor.plan_for(Action.RESUME, [rid])
    assert the_plan.operations and all("unpause" not in op for op in the_plan.operations)
    assert any("/reset" in op and "attempt 1" in op for op in the_plan.operations)

    [result] = await executor.execute(
        Command(type="command", id="resume-lost-1", action=Action.RESUME, targets=[rid],
                reason="worker host died"),
        who,
    )
    assert result.outcome == "applied", result
    assert "activity 1 reset" in result.detail and "attempt 1" in result.detail
    assert f"task queue '{task_queue}'" in result.detail
    assert result.plan is not None and result.plan.operations == the_plan.operations
    after = await adapter.get_run("lost-retry")
    assert after.attempt == 1  # the reset happened on the server, not just in words

    # what it said is what happens: a new worker runs the activity again, attempt 1, from the
    # step of its last heartbeat
    first = await wait_agent_start(tmp_path, "lost-retry", 1)
    start_worker()
    again = await wait_agent_start(tmp_path, "lost-retry", 2)
    assert first["attempt"] == 1 and first["from_step"] == 0
    assert again["attempt"] == 1 and again["from_step"] > 0

    # no retry left: nothing for Temporal to retry, and the result says why
    [refused] = await executor.execute(
        Command(type="command", id="resume-lost-2", action=Action.RESUME,
                targets=[f"temporal:{adapter.context}/lost-once"], reason="worker host died"),
        who,
    )
    assert refused.outcome == "conflict", refused
    assert "no retry left" in refused.detail
    journal.close()
