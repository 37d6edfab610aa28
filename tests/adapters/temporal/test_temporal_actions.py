"""Pause / resume / cancel / terminate on a real server with a real agent."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from temporal_scenarios import train_params, wait_run

from backend_adapters.base import Conflict
from backend_adapters.temporal.adapter import TemporalBackend
from console.model import Action, RunState
from console.semantics import plan


def lock_is_free(path: Path) -> bool:
    """True when nobody holds the agent's flock on ``path`` (checked from outside the agent)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def agent_reports(tmp_path: Path, wid: str) -> list[dict]:
    path = tmp_path / "agent-report.jsonl"
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["wf"] == wid]


def plan_for(adapter: TemporalBackend, action: Action, run):
    ops = {run.id: list(adapter.capabilities().actions[action].operations)}
    return plan(action, [run], operations=ops)


async def test_pause_keeps_gpu_releases_lock_and_resume_continues(
    adapter: TemporalBackend, temporal_server, start_worker, task_queue, tmp_path
) -> None:
    start_worker()
    lock = tmp_path / "p.lock"
    temporal_server.start_workflow("pause-1", "TrainAgent", task_queue, train_params(tmp_path, "p"))
    run = await wait_run(adapter, "pause-1", lambda r: (r.progress or 0) > 0.005)
    assert not lock_is_free(lock)

    pause_plan = plan_for(adapter, Action.PAUSE, run)
    assert [r.id for r in pause_plan.resources_kept] == ["gpu:0"]
    assert [r.id for r in pause_plan.resources_released] == [f"lock:{lock}"]
    assert any("pause" in op for op in pause_plan.operations)

    outcome = await adapter.pause("pause-1", reason="gpu reassignment", identity="alice")
    assert outcome.operations == ["pause activity 1 (train)"]
    paused = await wait_run(adapter, "pause-1", lambda r: r.state is RunState.PAUSED)
    # the agent's own report (heartbeat details recorded with the failed attempt)
    report = paused.details["report"]
    assert report["event"] == "paused"
    assert report["kept"] == ["gpu:0"] and report["released"] == [f"lock:{lock}"]
    states = {r.id: r.state for r in paused.resources}
    assert states == {"gpu:0": "held", f"lock:{lock}": "released"}
    assert paused.preempted
    pause_info = paused.details["pause"]["manual"]
    assert pause_info == {"identity": "alice", "reason": "gpu reassignment"}
    assert lock_is_free(lock)  # really released, checked from outside the agent
    step_at_pause = paused.details["progress"]["step"]

    with pytest.raises(Conflict):
        await adapter.pause("pause-1", reason="again", identity="alice")

    await adapter.resume("pause-1", reason="gpu back", identity="alice")
    resumed = await wait_run(
        adapter,
        "pause-1",
        lambda r: (
            r.state is RunState.RUNNING and r.details.get("report", {}).get("event") == "resumed"
        ),
    )
    assert resumed.attempt == 2
    resumed_report = resumed.details["report"]
    assert resumed_report["resumed_from"]["step"] == step_at_pause
    assert resumed_report["kept"] == ["gpu:0"]  # the same GPU slice, not acquired again
    assert resumed_report["reacquired"] == [f"lock:{lock}"]
    assert not lock_is_free(lock)
    started = [r for r in agent_reports(tmp_path, "pause-1") if r["event"] == "started"]
    assert [r["from_step"] for r in started] == [0, step_at_pause]
    await adapter.terminate("pause-1", reason="test cleanup", identity="tests")


async def test_cancel_vs_terminate(
    adapter: TemporalBackend, temporal_server, start_worker, task_queue, tmp_path
) -> None:
    start_worker()
    for wid in ("cancel-1", "term-1"):
        temporal_server.start_workflow(wid, "TrainAgent", task_queue, train_params(tmp_path, wid))
    runs = {
        wid: await wait_run(adapter, wid, lambda r: (r.progress or 0) > 0.003)
        for wid in ("cancel-1", "term-1")
    }

    cancel_plan = plan_for(adapter, Action.CANCEL, runs["cancel-1"])
    term_plan = plan_for(adapter, Action.TERMINATE, runs["term-1"])
    assert {r.id for r in cancel_plan.resources_released} == {
        "gpu:0",
        f"lock:{tmp_path / 'cancel-1.lock'}",
    }
    assert not cancel_plan.resources_at_risk
    assert not term_plan.resources_released
    assert {r.id for r in term_plan.resources_at_risk} == {
        "gpu:0",
        f"lock:{tmp_path / 'term-1.lock'}",
    }
    assert any("may leak" in w for w in term_plan.warnings)
    assert cancel_plan.operations != term_plan.operations

    cancelled = await adapter.cancel("cancel-1", reason="operator cancel", identity="bob")
    terminated = await adapter.terminate("term-1", reason="operator terminate", identity="bob")
    assert "clean" in cancelled.detail and "leak" in terminated.detail

    done_c = await wait_run(adapter, "cancel-1", lambda r: r.state is RunState.CANCELLED)
    done_t = await wait_run(adapter, "term-1", lambda r: r.state is RunState.TERMINATED)
    # cancel: the agent released everything and said so (memo irq_report)
    assert done_c.details["report"]["event"] == "cancelled"
    assert {r.state for r in done_c.resources} == {"released"}
    assert lock_is_free(tmp_path / "cancel-1.lock")
    # terminate: no cleanup ran on the console's watch: held resources are suspected leaks
    assert {r.state for r in done_t.resources} == {"suspected_leak"}
    assert "report" not in done_t.details

    close_c = temporal_server.result("cancel-1")
    close_t = temporal_server.result("term-1")
    assert close_c["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED"
    assert close_t["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED"
    attrs = close_t["workflowExecutionTerminatedEventAttributes"]
    assert attrs["reason"] == "operator terminate" and attrs["identity"] == "bob"
    journal = await adapter.journal("cancel-1")
    assert journal[0].status == "failed" and "cancelled on request" in journal[0].detail

    with pytest.raises(Conflict):
        await adapter.terminate("term-1", reason="again", identity="bob")
