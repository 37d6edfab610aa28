"""Failed runs, retry by workflow reset, and the alert facts (issues 23 and 24) on a real dev
server with a worker written as Temporal's samples write one (``recovery_worker.py``, no irq
code): side effects are counted in a file outside Temporal."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend_adapters.base import Conflict, InvalidInput, MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.temporal.adapter import TemporalBackend
from backend_adapters.temporal.dev_server import DevServer
from backend_adapters.temporal.observed_workflows import newest_runs
from backend_adapters.temporal.state_mapping import RunEvidence, run_from_evidence
from console.alert_model import AlertKind
from console.model import Run, RunState, utcnow
from console.processes import ChildProcess

WORKER = Path(__file__).with_name("recovery_worker.py")
REPO = Path(__file__).resolve().parents[3]
KEPT = ["fetch_data (activity 1)", "transform (activity 2)"]
PUBLISH = "publish (activity 3)"


def start_worker(server: DevServer, queue: str, log: Path) -> ChildProcess:
    child = ChildProcess(
        "recovery-worker",
        [sys.executable, str(WORKER), server.address, queue],
        log,
        env={"PYTHONPATH": str(REPO)},
    )
    child.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "ready" in (log.read_text(errors="replace") if log.exists() else ""):
            return child
        time.sleep(0.1)
    child.stop()
    raise AssertionError("recovery worker did not start: " + log.read_text()[-2000:])


@pytest.fixture(scope="module")
def queue() -> str:
    return f"rq-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def worker(
    temporal_server: DevServer, queue: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ChildProcess]:
    child = start_worker(temporal_server, queue, tmp_path_factory.mktemp("rw") / "worker.log")
    yield child
    child.stop()


async def open_adapter(server: DevServer, queue: str) -> TemporalBackend:
    backend = open_backend(
        server.backend_url(rps=100, query=f"TaskQueue='{queue}'", timeout=5, poll=0.2),
        MemoryPauseLedger(),
    )
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    return backend


def counts(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


def runs_of(server: DevServer, wid: str) -> list[dict[str, Any]]:
    r = httpx.get(
        f"{server.http_url}/api/v1/namespaces/default/workflows",
        params={"query": f"WorkflowId = '{wid}'"},
        timeout=10,
    )
    r.raise_for_status()
    return list(r.json().get("executions") or [])


async def observed_run(adapter: TemporalBackend, wid: str) -> Run | None:
    obs = await adapter.observe()
    return next((r for r in obs.runs if r.native_id == wid), None)


async def test_a_failed_run_shows_its_error_and_a_retry_reruns_only_the_failed_step(
    temporal_server: DevServer, worker: ChildProcess, queue: str, tmp_path: Path
) -> None:
    flag, tally = tmp_path / "flag", tmp_path / "counts"
    flag.touch()
    wid = f"three-{queue}"
    temporal_server.start_workflow(
        wid, "ThreeSteps", queue, {"counts": str(tally), "flag": str(flag)}
    )
    temporal_server.result(wid)
    adapter = await open_adapter(temporal_server, queue)
    try:
        listed: Run | None = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (listed is None or listed.error is None):
            listed = await observed_run(adapter, wid)  # the poll reads the failure itself
            await asyncio.sleep(0.2)
        assert listed is not None and listed.state is RunState.FAILED
        assert listed.error is not None and listed.error.type == "PublishRejected"
        run = await adapter.get_run(wid)
        assert run.state is RunState.FAILED
        assert run.error is not None
        assert (run.error.type, run.error.step) == ("PublishRejected", PUBLISH)
        assert run.error.message == "downstream rejected the batch"
        assert run.error.at is not None and run.last_step_at is not None
        assert run.last_step_at <= run.error.at

        plan = await adapter.retry_plan(wid, from_step=None)
        assert (plan.steps_kept, plan.will_rerun) == (KEPT, [PUBLISH])
        assert plan.unjournaled_effects == [PUBLISH] and plan.new_run
        assert plan.from_step == PUBLISH
        for chosen in ("transform", "1", "transform (activity 2)"):
            earlier = await adapter.retry_plan(wid, from_step=chosen)
            assert earlier.steps_kept == KEPT[:1]
            assert earlier.will_rerun == [KEPT[1], PUBLISH]
        with pytest.raises(InvalidInput, match="no activity 'upload'"):
            await adapter.retry_plan(wid, from_step="upload")
        old_run = runs_of(temporal_server, wid)[0]["execution"]["runId"]

        flag.unlink()
        outcome = await adapter.retry(
            wid, from_step=None, request_id="retry-k1", reason="flake fixed", identity="alice"
        )
        assert "new run" in outcome.detail and outcome.new_native_id is None
        closed = temporal_server.result(wid)
        assert closed["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
        assert counts(tally) == {"fetch_data": 1, "transform": 1, "publish": 2}

        again = await adapter.retry(
            wid, from_step=None, request_id="retry-k1", reason="again", identity="alice"
        )
        assert "already retried" in again.detail and again.operations == []
        assert counts(tally) == {"fetch_data": 1, "transform": 1, "publish": 2}
        assert len(runs_of(temporal_server, wid)) == 2
        with pytest.raises(Conflict, match="completed"):
            await adapter.retry_plan(wid, from_step=None)
    finally:
        await adapter.close()

    # a gateway started after the reset shows the new run, not the failed one it replaced
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        listed = runs_of(temporal_server, wid)
        if len(listed) == 2 and all(r.get("closeTime") for r in listed):
            break
        await asyncio.sleep(0.2)
    assert newest_runs(listed)[wid]["execution"]["runId"] != old_run
    fresh = await open_adapter(temporal_server, queue)
    try:
        seen = await observed_run(fresh, wid)
        assert seen is not None and seen.state is RunState.COMPLETED and seen.error is None
    finally:
        await fresh.close()


async def test_a_failed_run_outlives_the_closed_window_in_a_freshly_started_adapter(
    temporal_server: DevServer, worker: ChildProcess, queue: str, tmp_path: Path
) -> None:
    flag, tally = tmp_path / "flag", tmp_path / "counts"
    params = {"counts": str(tally), "flag": str(flag)}
    failed, done, healed = (f"late-{k}-{queue}" for k in ("failed", "done", "healed"))
    temporal_server.start_workflow(done, "ThreeSteps", queue, params)
    temporal_server.result(done)
    flag.touch()
    for wid in (failed, healed):
        temporal_server.start_workflow(wid, "ThreeSteps", queue, params)
        temporal_server.result(wid)
    flag.unlink()  # healed is started again under the same id, and completes
    temporal_server.start_workflow(healed, "ThreeSteps", queue, params)
    temporal_server.result(healed)
    await asyncio.sleep(1.5)  # all closed longer ago than closed_window=1

    async def fresh_ids(**window: float) -> dict[str, Run]:
        url = temporal_server.backend_url(
            rps=100, query=f"TaskQueue='{queue}'", closed_window=1, **window
        )
        adapter = open_backend(url, MemoryPauseLedger())
        await adapter.start()
        try:
            await adapter.observe()  # the second poll sees every old run checked
            return {r.native_id: r for r in (await adapter.observe()).runs}
        finally:
            await adapter.close()

    seen = await fresh_ids()  # the default failed window: a day
    assert failed in seen and seen[failed].state is RunState.FAILED
    assert done not in seen  # completed runs still age out after closed_window
    assert healed not in seen  # its failure was replaced by a newer, completed run
    assert failed not in await fresh_ids(failed_window=1)


async def test_an_activity_retried_forever_shows_a_growing_attempt_and_retry_is_refused(
    temporal_server: DevServer, worker: ChildProcess, queue: str
) -> None:
    wid = f"flaky-{queue}"
    temporal_server.start_workflow(wid, "AlwaysFailing", queue, {})
    adapter = await open_adapter(temporal_server, queue)
    try:
        attempts: list[int] = []
        backing_off = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(set(attempts)) < 2 or not backing_off):
            run = await adapter.get_run(wid)
            if run.retrying is not None:
                assert run.retrying.step == "flaky_call (activity 1)"
                assert run.retrying.last_error == "UpstreamUnavailable: upstream 503"
                # While an attempt runs Temporal schedules no next one (next_attempt_at
                # None); between attempts it says when the next one starts.
                backing_off += run.retrying.next_attempt_at is not None
                attempts.append(run.retrying.attempt)
            await asyncio.sleep(0.3)
        assert len(set(attempts)) >= 2 and attempts[0] >= 2 and attempts[-1] > attempts[0]
        assert backing_off, "never saw when the next attempt starts"
        with pytest.raises(Conflict, match="still running.*cancel"):
            await adapter.retry(
                wid, from_step=None, request_id="k-running", reason="x", identity="alice"
            )
        await adapter.terminate(wid, reason="test over", identity="alice")
    finally:
        await adapter.close()


async def test_a_queue_nobody_polls_is_a_no_workers_condition_until_a_worker_starts(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    lonely = f"nobody-{uuid.uuid4().hex[:8]}"
    temporal_server.start_workflow(
        f"w1-{lonely}", "ThreeSteps", lonely, {"counts": str(tmp_path / "c"), "flag": "/none"}
    )
    temporal_server.start_workflow(
        f"w2-{lonely}", "ThreeSteps", lonely, {"counts": str(tmp_path / "c"), "flag": "/none"}
    )
    adapter = await open_adapter(temporal_server, lonely)
    subject = f"temporal:{adapter.context}/task-queue/{lonely}"
    child: ChildProcess | None = None
    try:
        deadline = time.monotonic() + 20
        found = []
        while time.monotonic() < deadline and not found:
            obs = await adapter.observe()
            found = [c for c in obs.conditions if c.subject == subject]
            await asyncio.sleep(0.2)
        assert found, "no no_workers condition"
        (cond,) = found
        assert cond.kind is AlertKind.NO_WORKERS and cond.run is None
        assert cond.facts["workflows"] == 2 and "2 running workflows" in cond.detail
        assert cond.action == f"start a worker polling task queue {lonely}"

        child = start_worker(temporal_server, lonely, tmp_path / "late-worker.log")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and found:
            obs = await adapter.observe()
            found = [c for c in obs.conditions if c.subject == subject]
            await asyncio.sleep(0.3)
        assert not found, "the condition stayed after a worker started polling"
    finally:
        await adapter.close()
        if child is not None:
            child.stop()


async def test_queues_nobody_polls_are_reported_when_the_runs_use_up_the_request_budget(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    """More running workflows than the request budget describes in a poll: the refresh of
    their heartbeats once spent every token and the task queues were never described, so
    no ``no_workers`` came (benchmarks/alert_polling.py, 50 queues). The queues go first."""
    tag = uuid.uuid4().hex[:8]
    queues = [f"starved-{tag}-{k}" for k in range(12)]
    for k, queue in enumerate(queues):
        temporal_server.start_workflow(
            f"w-{queue}", "ThreeSteps", queue, {"counts": str(tmp_path / f"c{k}"), "flag": "/none"}
        )
    listed = ", ".join(f"'{q}'" for q in queues)
    backend = open_backend(
        temporal_server.backend_url(rps=3, query=f"TaskQueue IN ({listed})", timeout=5,
                                    poll=0.2),
        MemoryPauseLedger(),
    )
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    try:
        reported: set[str] = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(reported) < len(queues):
            obs = await backend.observe()
            assert len(obs.runs) >= len(queues)
            reported |= {c.facts["task_queue"] for c in obs.conditions
                         if c.kind is AlertKind.NO_WORKERS}
            await asyncio.sleep(0.2)
        assert reported == set(queues)
    finally:
        await backend.close()


def test_an_activity_a_workflow_rule_paused_is_given_up_and_a_manual_pause_is_paused() -> None:
    def run_with(pause_info: dict[str, Any]) -> Run:
        info = {
            "execution": {"workflowId": "w", "runId": "r"},
            "status": "WORKFLOW_EXECUTION_STATUS_RUNNING",
        }
        describe_activity = {
            "activityId": "1",
            "activityType": {"name": "charge"},
            "state": "PENDING_ACTIVITY_STATE_PAUSED",
            "attempt": 5,
            "paused": True,
            "pauseInfo": pause_info,
            "lastFailure": {"message": "card declined", "applicationFailureInfo": {"type": "Dx"}},
        }
        from backend_adapters.temporal.state_mapping import activity_from_json

        ev = RunEvidence("w", info, [activity_from_json(describe_activity)], utcnow())
        return run_from_evidence(ev, context="c", now=utcnow())

    ruled = run_with({"pauseTime": "2026-01-01T00:00:00Z", "ruleId": "stop-after-5"})
    assert ruled.state is RunState.GIVEN_UP
    assert ruled.error is not None and ruled.error.step == "charge (activity 1)"
    assert "stop-after-5" in ruled.error.message and ruled.error.type == "Dx"
    manual = run_with({"pauseTime": "2026-01-01T00:00:00Z", "manual": {"identity": "bob"}})
    assert manual.state is RunState.PAUSED and manual.error is None


def test_the_newest_run_of_a_workflow_id_wins_whatever_the_list_order() -> None:
    old = {"execution": {"workflowId": "w", "runId": "a"}, "startTime": "2026-01-01T00:00:00Z"}
    new = {"execution": {"workflowId": "w", "runId": "b"}, "startTime": "2026-01-01T00:01:00Z"}
    assert newest_runs([new, old])["w"] is new
    assert newest_runs([old, new])["w"] is new
