"""The DBOS adapter against real DBOS agents on SQLite (agents in subprocesses).

Each test enqueues a small plan for the demo agent workflow on a worker process, then
observes and acts through the adapter exactly as the gateway does. The agents' own execution
log (one line per step execution, reservation and decision) and the heartbeat frames they
push are the evidence for what ran and what was released.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from backend_adapters.base import (
    Conflict,
    InvalidInput,
    MemoryPauseLedger,
    NotFound,
    Unreachable,
    Unsupported,
)
from backend_adapters.dbos.adapter import DBOSBackend
from backend_adapters.registry import open_backend
from console.model import Action, Decision, DecisionKind, Interrupt, Run, RunState
from devtools.dbos_record import settled_record

SCHEMA = {
    "type": "object",
    "required": ["service", "environment"],
    "properties": {
        "service": {"type": "string"},
        "environment": {"type": "string", "enum": ["staging", "prod"]},
        "canary_percent": {"type": "integer", "minimum": 1, "maximum": 50},
    },
    "additionalProperties": False,
}

GPU = {"id": "gpu-0/slice-1", "kind": "gpu", "on_pause": "keep", "on_cancel": "release"}
LOCK = {"id": "lock/orders", "kind": "lock", "on_pause": "release", "on_cancel": "release"}
BUDGET = {"id": "budget/tokens", "kind": "budget", "on_pause": "keep", "on_cancel": "keep"}


def plan(*script: dict[str, Any], resources: list[dict[str, Any]] | None = None) -> dict:
    return {
        "name": "test-agent",
        "interval_s": 0.5,
        "timeout_s": 5.0,
        "decision_poll_s": 0.5,
        "resources": resources if resources is not None else [GPU, LOCK],
        "script": list(script),
    }


def step(name: str, seconds: float = 0.2) -> dict[str, Any]:
    return {"step": name, "seconds": seconds}


def deploy(*then: dict[str, Any]) -> dict[str, Any]:
    return {
        "interrupt": {
            "title": "Deploy billing to prod?",
            "description": "tests passed",
            "action": "deploy",
            "args": {"service": "billing", "environment": "prod", "canary_percent": 10},
            "args_schema": SCHEMA,
            "allowed": ["approve", "edit", "reject"],
        },
        "then": list(then),
    }


@pytest.fixture
async def backend(dbos_worker):
    b = open_backend(f"dbos+sqlite:///{dbos_worker.db}?poll=0.5", MemoryPauseLedger())
    assert isinstance(b, DBOSBackend)
    await b.start()
    try:
        yield b
    finally:
        await b.close()


async def observed(backend: DBOSBackend, wid: str) -> tuple[Run | None, list[Interrupt]]:
    obs = await backend.observe()
    run = next((r for r in obs.runs if r.native_id == wid), None)
    return run, [i for i in obs.interrupts if run and i.run_id == run.id]


async def pending_interrupt(backend: DBOSBackend, wid: str, waiter) -> Interrupt:
    async def found():
        return (await observed(backend, wid))[1]

    return (await waiter(found))[0]


async def run_where(backend: DBOSBackend, wid: str, waiter, check, timeout_s: float = 15.0):
    async def probe():
        run = await backend.get_run(wid)
        return run if check(run) else None

    return await waiter(probe, timeout_s=timeout_s)


def executions(worker, wid: str, name: str) -> int:
    return sum(1 for e in worker.exec_log(wid) if e["event"] == "step" and e["step"] == name)


# ------------------------------------------------------------------------------ observe


async def test_observe_maps_running_run_resources_and_pending_interrupt(
    backend, dbos_worker, waiter
):
    wid = dbos_worker.enqueue(plan(step("prepare"), deploy(step("ship"))))
    interrupt = await pending_interrupt(backend, wid, waiter)
    run, _ = await observed(backend, wid)
    assert run is not None
    assert run.id == f"dbos:local/{wid}" and run.backend == "dbos" and run.context == "local"
    assert run.state is RunState.RUNNING and run.native_state == "PENDING"
    assert run.name == "test-agent"
    assert (run.heartbeat_interval_s, run.heartbeat_timeout_s) == (0.5, 5.0)
    assert {(r.id, r.kind, r.on_pause, r.state) for r in run.resources} == {
        ("gpu-0/slice-1", "gpu", "keep", "held"),
        ("lock/orders", "lock", "release", "held"),
    }
    assert run.attempt == 1 and run.preempted is False
    assert run.interrupts == [interrupt.id]
    assert interrupt.native_id == f"{wid}/1"
    assert interrupt.id == f"dbos:local/{wid}#{wid}/1"
    assert interrupt.title == "Deploy billing to prod?"
    assert interrupt.action == "deploy"
    assert interrupt.args == {"service": "billing", "environment": "prod", "canary_percent": 10}
    assert interrupt.args_schema == SCHEMA
    assert interrupt.allowed_decisions == [
        DecisionKind.APPROVE,
        DecisionKind.EDIT,
        DecisionKind.REJECT,
    ]
    # The helper publishes the interrupt (DBOS.set_event, its own transaction) and then
    # starts DBOS.recv, whose timeout row is written by the recv's own transaction: the two
    # are not written together, so on a slow machine the interrupt can be read in between
    # (a decision sent then is not lost: DBOS queues it for the recv). Wait for the wait.
    async def journal_steps():
        steps = [(s.name, s.status) for s in await backend.journal(wid)]
        return steps if len(steps) == 2 else None

    assert await waiter(journal_steps) == [
        ("prepare", "completed"),
        ("wait for decision", "in_flight"),
    ]

    await backend.decide(
        interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key="c-1", identity="alice"
    )
    done = await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)
    assert done.native_state == "SUCCESS" and done.interrupts == []
    assert {r.state for r in done.resources} == {"released"}
    journal = [(s.name, s.status) for s in await backend.journal(wid)]
    assert journal == [
        ("prepare", "completed"),
        ("wait for decision", "completed"),
        ("record decision (approve)", "completed"),
        ("ship", "completed"),
    ]
    # a finished run is reported by the next poll, then only when it changes again
    again, interrupts = await observed(backend, wid)
    assert again is not None and again.state is RunState.COMPLETED and interrupts == []
    assert (await observed(backend, wid))[0] is None


# ------------------------------------------------------------------------------ decide


async def test_decide_same_key_twice_and_a_second_gateway_deliver_once(
    backend, dbos_worker, waiter
):
    wid = dbos_worker.enqueue(plan(deploy(step("ship"))))
    interrupt = await pending_interrupt(backend, wid, waiter)
    edit = Decision(kind=DecisionKind.EDIT, args={"service": "billing", "environment": "staging"})
    # a retried command (same idempotency key) and a second gateway deciding differently,
    # both before the agent consumed the first decision
    await backend.decide(interrupt, edit, idempotency_key="cmd-1", identity="alice")
    await backend.decide(interrupt, edit, idempotency_key="cmd-1", identity="alice")
    with pytest.raises(Conflict):
        await backend.decide(
            interrupt, Decision(kind=DecisionKind.REJECT), idempotency_key="cmd-2", identity="bob"
        )
    other = open_backend(f"dbos+sqlite:///{dbos_worker.db}", MemoryPauseLedger())
    await other.start()
    try:
        try:
            await other.decide(
                interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key="x", identity="eve"
            )
        except Conflict:
            pass  # the agent already consumed the first decision: also fine
        await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)
        with pytest.raises(Conflict):
            await other.decide(
                interrupt, Decision(kind=DecisionKind.APPROVE), idempotency_key="y", identity="eve"
            )
    finally:
        await other.close()
    decisions = [e for e in dbos_worker.exec_log(wid) if e["event"] == "decision"]
    assert len(decisions) == 1
    assert decisions[0]["type"] == "edit" and decisions[0]["by"] == "alice"
    assert decisions[0]["command_id"] == "cmd-1"
    ships = [e for e in dbos_worker.exec_log(wid) if e["event"] == "step"]
    assert [(e["step"], e["args"]["environment"]) for e in ships] == [("ship", "staging")]


async def test_retry_after_the_agent_consumed_the_decision_is_a_success_not_a_conflict(
    backend, dbos_worker, waiter
):
    """A gateway restarted between send and outcome re-drives with the same command id: the
    adapter must recognise its own delivered decision (from the run's journal)."""
    wid = dbos_worker.enqueue(plan(deploy(step("ship"))))
    interrupt = await pending_interrupt(backend, wid, waiter)
    approve = Decision(kind=DecisionKind.APPROVE)
    await backend.decide(interrupt, approve, idempotency_key="cmd-r", identity="alice")
    await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)
    restarted = open_backend(f"dbos+sqlite:///{dbos_worker.db}", MemoryPauseLedger())
    await restarted.start()
    try:
        again = await restarted.decide(interrupt, approve, idempotency_key="cmd-r", identity="alice")
        assert "already delivered" in again.detail
        with pytest.raises(Conflict, match=r"already (decided|sent)"):
            await restarted.decide(interrupt, approve, idempotency_key="cmd-other", identity="bob")
    finally:
        await restarted.close()
    decisions = [e for e in dbos_worker.exec_log(wid) if e["event"] == "decision"]
    assert len(decisions) == 1


async def test_edit_with_args_failing_the_schema_is_invalid_and_not_delivered(
    backend, dbos_worker, waiter
):
    wid = dbos_worker.enqueue(plan(deploy(step("ship"))))
    interrupt = await pending_interrupt(backend, wid, waiter)
    bad = Decision(kind=DecisionKind.EDIT, args={"service": "billing", "environment": "moon"})
    with pytest.raises(InvalidInput, match="environment"):
        await backend.decide(interrupt, bad, idempotency_key="b-1", identity="alice")
    missing = Decision(kind=DecisionKind.EDIT, args={"environment": "prod"})
    with pytest.raises(InvalidInput, match="'service' is a required property"):
        await backend.decide(interrupt, missing, idempotency_key="b-2", identity="alice")
    with pytest.raises(InvalidInput, match="not allowed"):
        await backend.decide(
            interrupt, Decision(kind=DecisionKind.RESPOND, response="hi"), idempotency_key="b-3",
            identity="alice",
        )  # fmt: skip
    run, interrupts = await observed(backend, wid)
    assert run is not None and [i.native_id for i in interrupts] == [interrupt.native_id]
    # then a valid decision; once the workflow has finished, its own record shows that this
    # one was the only message it was ever sent, and the only decision it received
    reject = Decision(kind=DecisionKind.REJECT, feedback="the valid one")
    await backend.decide(interrupt, reject, idempotency_key="b-4", identity="alice")
    record = await settled_record(dbos_worker.db, wid)
    assert record.status == "SUCCESS", record
    assert [m["message"]["type"] for m in record.sent] == ["reject"], record.sent
    assert [(m["type"], m["feedback"]) for m in record.received] == [("reject", "the valid one")]
    decisions = [e for e in dbos_worker.exec_log(wid) if e["event"] == "decision"]
    assert [d["type"] for d in decisions] == ["reject"]


# ------------------------------------------------------------------------ pause / resume


async def test_pause_releases_lock_keeps_gpu_and_resume_replays_completed_steps(
    backend, dbos_worker, agent_channel, waiter
):
    wid = dbos_worker.enqueue(plan(step("fetch"), step("plan"), step("train", 4.0), step("report")))
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "train")
    outcome = await backend.pause(wid, reason="GPU needed elsewhere", identity="alice")
    assert outcome.operations == [
        "update_workflow_attributes(irq.intent=pause)",
        "cancel_workflow",
    ]
    run = await backend.get_run(wid)
    assert run.state is RunState.PAUSED and run.native_state == "CANCELLED"
    assert run.in_flight_step == "train"  # re-runs on resume
    # the agent notices at the end of its step, releases the lock and keeps the GPU
    run = await run_where(backend, wid, waiter, lambda r: r.details.get("agent_phase") == "paused")
    assert {r.id: r.state for r in run.resources} == {
        "gpu-0/slice-1": "held",
        "lock/orders": "released",
    }
    board = sorted(p.name for p in Path(dbos_worker.board).iterdir())
    assert any("gpu-0" in name for name in board) and not any("lock" in n for n in board)
    released = [e["id"] for e in dbos_worker.exec_log(wid) if e["event"] == "release"]
    assert released == ["lock/orders"]
    final = await waiter(lambda: [b for b in agent_channel.beats(wid) if b["phase"] == "paused"])
    assert {r["id"]: r["state"] for r in final[-1]["resources"]} == {
        "gpu-0/slice-1": "held",
        "lock/orders": "released",
    }
    journal = {s.name: s.status for s in await backend.journal(wid)}
    assert journal == {"fetch": "completed", "plan": "completed", "train": "in_flight"}
    seen, _ = await observed(backend, wid)  # paused runs are in every observation
    assert seen is not None and seen.state is RunState.PAUSED and seen.in_flight_step == "train"
    assert (await backend.pause(wid, reason="again", identity="alice")).detail == "already paused"

    await backend.resume(wid, reason="GPU free again", identity="alice")
    done = await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED)
    assert done.attempt == 1 and not done.preempted
    assert [executions(dbos_worker, wid, s) for s in ("fetch", "plan", "train", "report")] == [
        1,
        1,
        2,  # in flight at the pause: at-least-once
        1,
    ]
    reserves = [e["id"] for e in dbos_worker.exec_log(wid) if e["event"] == "reserve"]
    assert reserves.count("lock/orders") == 2  # re-acquired by the resumed execution
    await waiter(lambda: agent_channel.beats(wid)[-1]["phase"] == "completed")
    assert "running" in {b["phase"] for b in agent_channel.beats(wid)}
    assert agent_channel.authorizations[0] == "Bearer test-agent-token"


async def test_resume_refuses_a_live_pending_run_unless_lost(backend, dbos_worker, waiter):
    wid = dbos_worker.enqueue(plan(step("long", 3.0)))
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "long")
    with pytest.raises(Conflict, match="runs? .*twice|twice"):
        await backend.resume(wid, reason="oops", identity="alice")
    await backend.cancel(wid, reason="cleanup", identity="alice")


async def test_a_poll_that_read_the_row_mid_resume_shows_paused_not_cancelled(
    dbos_worker, waiter, monkeypatch
):
    """A resume writes irq.intent=resume, then calls resume_workflow: a poll that read the
    row between the two (CANCELLED, intent resume) and maps it after the resume returned
    showed the paused run as cancelled (terminal; ``irq resume --wait`` said "ended
    cancelled" once in CI). Both are held here at those points, in that order. A gateway
    on another journal, without the pause mark, reads the same row as paused too."""
    ledger = MemoryPauseLedger()
    backend = open_backend(f"dbos+sqlite:///{dbos_worker.db}?poll=0.5", ledger)
    assert isinstance(backend, DBOSBackend)
    await backend.start()
    try:
        wid = dbos_worker.enqueue(plan(step("a", 2.0), step("b", 5.0)))
        await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "a")
        await backend.pause(wid, reason="hold", identity="alice")
        await run_where(backend, wid, waiter, lambda r: r.details.get("agent_phase") == "paused")

        client = await backend._database.call(backend._database.connected)
        at_resume, go_resume = threading.Event(), threading.Event()
        resume_workflow = client.resume_workflow

        def held_resume(workflow_id: str) -> Any:
            at_resume.set()  # irq.intent=resume is written
            assert go_resume.wait(30)
            return resume_workflow(workflow_id)

        monkeypatch.setattr(client, "resume_workflow", held_resume)
        await asyncio.sleep(1.1)  # an intent dated past the cancel's second (SQLite's)
        resuming = asyncio.create_task(backend.resume(wid, reason="go", identity="alice"))
        await waiter(at_resume.is_set)
        # a gateway on another journal (no pause mark) reads the row itself: still paused
        other = open_backend(f"dbos+sqlite:///{dbos_worker.db}?poll=0.5", MemoryPauseLedger())
        assert isinstance(other, DBOSBackend)
        await other.start()
        try:
            assert (await other.get_run(wid)).state is RunState.PAUSED
            seen, _ = await observed(other, wid)
            assert seen is not None and seen.state is RunState.PAUSED
        finally:
            await other.close()

        observer = backend._observer
        listed, go_map = threading.Event(), threading.Event()
        list_sync = observer._list_sync

        def held_list(*args: Any) -> Any:
            listing = list_sync(*args)
            listed.set()
            assert go_map.wait(30)
            return listing

        monkeypatch.setattr(observer, "_list_sync", held_list)
        polling = asyncio.create_task(backend.observe())
        await waiter(listed.is_set)  # the poll read the row: CANCELLED, intent resume
        go_resume.set()
        await resuming  # resume_workflow applied and the action returned
        go_map.set()
        run = next(r for r in (await polling).runs if r.native_id == wid)
        assert run.native_state == "CANCELLED" and run.details["intent"]["action"] == "resume"
        assert run.state is RunState.PAUSED
        assert (await backend.get_run(wid)).state is RunState.RUNNING

        # the next poll reads it running; the pause mark is gone with it
        seen = await waiter(lambda: observed_in(backend, wid, RunState.RUNNING))
        assert seen.native_state in ("ENQUEUED", "PENDING")
        assert not ledger.is_paused(seen.id)

        # cancelled directly through DBOS (irq.intent stays resume): cancelled, not paused
        await asyncio.to_thread(cancel_directly, dbos_worker.url, wid)
        run = await backend.get_run(wid)
        assert run.state is RunState.CANCELLED and run.details["intent"]["action"] == "resume"
        seen, _ = await observed(backend, wid)
        assert seen is not None and seen.state is RunState.CANCELLED
    finally:
        await backend.close()


async def test_the_pause_mark_goes_once_a_poll_read_the_run_resumed(dbos_worker, waiter):
    """The two ways the mark goes: this gateway's resume applied before a poll read the run
    (here cancelled directly through DBOS before any poll saw it running), and a gateway
    (restarted: same ledger, fresh adapter) first seeing a resumed run active."""
    ledger = MemoryPauseLedger()
    url = f"dbos+sqlite:///{dbos_worker.db}?poll=0.5"
    first, restarted = open_backend(url, ledger), open_backend(url, ledger)
    assert isinstance(first, DBOSBackend) and isinstance(restarted, DBOSBackend)
    await first.start()
    await restarted.start()
    try:
        wids = []
        # one after the other: enqueued together, the worker may run the second first and
        # finish it while the first is awaited, and it is never seen in a step
        for _ in range(2):
            wid = dbos_worker.enqueue(plan(step("a", 1.0), step("b", 5.0)))
            await run_where(first, wid, waiter, lambda r: r.in_flight_step in ("a", "b"))
            await first.pause(wid, reason="hold", identity="alice")
            wids.append(wid)
        cancelled, resumed = wids
        # resumed by the first gateway, which stops before its next poll; the restarted one
        # first sees it running and clears the mark
        await first.resume(resumed, reason="go", identity="alice")
        assert ledger.is_paused(first.run_id(resumed))  # until a poll read it resumed
        await waiter(lambda: observed_in(restarted, resumed, RunState.RUNNING))
        assert not ledger.is_paused(first.run_id(resumed))
        await asyncio.to_thread(cancel_directly, dbos_worker.url, resumed)
        assert (await restarted.get_run(resumed)).state is RunState.CANCELLED

        # resumed, then cancelled directly through DBOS before any poll saw it running
        await first.resume(cancelled, reason="go", identity="alice")
        assert ledger.is_paused(first.run_id(cancelled))
        await asyncio.to_thread(cancel_directly, dbos_worker.url, cancelled)
        run = await first.get_run(cancelled)
        assert run.native_state == "CANCELLED" and run.details["intent"]["action"] == "resume"
        seen, _ = await observed(first, cancelled)  # its first poll: the resume applied
        assert seen is not None and seen.state is RunState.CANCELLED
        assert not ledger.is_paused(seen.id)
    finally:
        await first.close()
        await restarted.close()


async def observed_in(backend: DBOSBackend, wid: str, state: RunState) -> Run | None:
    run, _ = await observed(backend, wid)
    return run if run is not None and run.state is state else None


def cancel_directly(url: str, wid: str) -> None:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=url)
    try:
        client.cancel_workflow(wid)
    finally:
        client.destroy()


# ------------------------------------------------------------------------------- cancel


async def test_cancel_releases_everything_not_kept_on_cancel(backend, dbos_worker, waiter):
    wid = dbos_worker.enqueue(
        plan(step("a"), step("b", 3.0), step("c"), resources=[GPU, LOCK, BUDGET])
    )
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "b")
    await backend.cancel(wid, reason="wrong task", identity="alice")
    run = await run_where(
        backend, wid, waiter, lambda r: r.details.get("agent_phase") == "cancelled"
    )
    assert run.state is RunState.CANCELLED and run.native_state == "CANCELLED"
    assert {r.id: r.state for r in run.resources} == {
        "gpu-0/slice-1": "released",
        "lock/orders": "released",
        "budget/tokens": "held",  # on_cancel=keep
    }
    assert executions(dbos_worker, wid, "c") == 0
    seen, _ = await observed(backend, wid)
    assert seen is None or seen.state is RunState.CANCELLED
    assert (await backend.cancel(wid, reason="again", identity="alice")).detail == (
        "already cancelled"
    )
    with pytest.raises(Conflict):
        await backend.resume(wid, reason="no", identity="alice")
    with pytest.raises(Conflict):
        await backend.pause(wid, reason="no", identity="alice")


async def test_cancel_of_a_paused_run_lets_the_agent_release_what_it_kept(
    backend, dbos_worker, waiter
):
    wid = dbos_worker.enqueue(plan(step("a", 3.0), step("b")))
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "a")
    await backend.pause(wid, reason="hold", identity="alice")
    await run_where(backend, wid, waiter, lambda r: r.details.get("agent_phase") == "paused")
    outcome = await backend.cancel(wid, reason="drop it", identity="alice")
    assert "resume_workflow (cleanup)" in outcome.operations
    run = await run_where(
        backend,
        wid,
        waiter,
        lambda r: r.native_state == "CANCELLED" and r.details.get("agent_phase") == "cancelled",
    )
    assert run.state is RunState.CANCELLED
    assert {r.id: r.state for r in run.resources} == {
        "gpu-0/slice-1": "released",
        "lock/orders": "released",
    }
    assert not any(Path(dbos_worker.board).iterdir()) or not any(
        wid in p.read_text() for p in Path(dbos_worker.board).iterdir()
    )
    assert executions(dbos_worker, wid, "b") == 0  # the cleanup execution ran no step


async def test_terminate_is_unsupported_and_capabilities_say_why(backend):
    caps = backend.capabilities()
    assert not caps.supports(Action.TERMINATE) and caps.native_heartbeats is False
    assert "no kill" in caps.actions[Action.TERMINATE].meaning
    assert caps.actions[Action.PAUSE].native is False
    with pytest.raises(Unsupported):
        await backend.terminate("whatever", reason="", identity="alice")


# -------------------------------------------------------------------- crash / recovery


async def test_sigkilled_worker_leaves_run_pending_and_recovery_marks_it_preempted(
    dbos_worker_factory, tmp_path, waiter
):
    # its own database: every worker on a database serves every queue registered in it
    worker = dbos_worker_factory("w-crash", root=tmp_path)
    backend = open_backend(f"dbos+sqlite:///{worker.db}", MemoryPauseLedger())
    await backend.start()
    wid = worker.enqueue(plan(step("one"), step("two", 4.0), step("three")))
    await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "two")
    worker.kill()
    run = await backend.get_run(wid)
    assert run.state is RunState.RUNNING and run.native_state == "PENDING"  # DBOS cannot tell
    assert run.in_flight_step == "two"
    worker.start()  # same executor id and application version: DBOS recovers the run
    done = await run_where(backend, wid, waiter, lambda r: r.state is RunState.COMPLETED, 30)
    assert done.preempted is True and done.attempt == 2
    assert done.details["executor_id"] == "w-crash" and done.details["recoveries"] == 1
    assert [executions(worker, wid, s) for s in ("one", "two", "three")] == [1, 2, 1]
    worker.stop()
    await backend.close()


async def test_a_recovered_run_is_retrying_until_it_completes_a_step_after_the_recovery(
    dbos_worker_factory, tmp_path, waiter
):
    # a restart (a deploy) must not leave a run retrying for the rest of its life
    worker = dbos_worker_factory("w-recover", root=tmp_path)
    backend = open_backend(f"dbos+sqlite:///{worker.db}", MemoryPauseLedger())
    await backend.start()
    try:
        await retrying_until_a_step_after_the_recovery(backend, worker, waiter)
    finally:
        worker.stop()
        await backend.close()


async def retrying_until_a_step_after_the_recovery(backend, worker, waiter) -> None:
    """SIGKILL the worker mid-step and start it again: the recovered run is ``retrying``
    until a step started after the recovery completes (test_dbos_postgres runs it too)."""
    wid = worker.enqueue(plan(step("one"), step("two", 4.0), step("three", 6.0)))
    first = await run_where(backend, wid, waiter, lambda r: r.in_flight_step == "two")
    assert first.retrying is None
    worker.kill()
    worker.start()  # DBOS recovers the run: "two" runs again, from its start

    async def polled(check):
        async def probe():
            run = (await observed(backend, wid))[0]
            return run if run is not None and check(run) else None

        return await waiter(probe, timeout_s=30)

    again = await polled(lambda r: r.attempt == 2 and executions(worker, wid, "two") == 2)
    assert again.in_flight_step == "two" and again.state is RunState.RUNNING
    assert again.retrying is not None and again.retrying.attempt == 2
    assert "recovered 1 time(s)" in again.retrying.last_error
    assert "no step completed since its latest dispatch" in again.retrying.last_error
    assert (await backend.get_run(wid)).retrying == again.retrying

    # "two" completes after the recovery (its row is journaled before "three" starts and
    # marks itself in flight): the run moved on while it still runs
    moved = await polled(lambda r: r.in_flight_step == "three")
    assert moved.state is RunState.RUNNING and moved.native_state == "PENDING"
    assert moved.attempt == 2 and executions(worker, wid, "three") == 1
    assert moved.retrying is None
    assert (await backend.get_run(wid)).retrying is None


# ------------------------------------------------------------------------ error mapping


async def test_unknown_workflow_id_is_not_found_for_every_operation(backend):
    with pytest.raises(NotFound):
        await backend.get_run("no-such-workflow")
    with pytest.raises(NotFound):
        await backend.journal("no-such-workflow")
    for op in (backend.pause, backend.resume, backend.cancel):
        with pytest.raises(NotFound):
            await op("no-such-workflow", reason="", identity="alice")
    ghost = Interrupt(
        id="dbos:local/no-such-workflow#no-such-workflow/1",
        run_id="dbos:local/no-such-workflow",
        native_id="no-such-workflow/1",
        title="?",
    )
    with pytest.raises(NotFound):
        await backend.decide(
            ghost, Decision(kind=DecisionKind.APPROVE), idempotency_key="k", identity="alice"
        )


@pytest.mark.parametrize("kind", ["missing", "garbage", "empty-sqlite", "directory"])
async def test_bad_database_is_unreachable_not_a_crash(tmp_path, kind):
    path = tmp_path / "sys.db"
    if kind == "garbage":
        path.write_bytes(b"this is not a database\x00" * 100)
    elif kind == "empty-sqlite":
        import sqlite3

        sqlite3.connect(path).execute("create table t (x)").connection.close()
    elif kind == "directory":
        path.mkdir()
    backend = open_backend(f"dbos+sqlite:///{path}", MemoryPauseLedger())
    try:
        with pytest.raises(Unreachable) as err:
            await backend.start()
        with pytest.raises(Unreachable):
            await backend.observe()
        with pytest.raises(Unreachable):
            await backend.get_run("x")
    finally:
        await backend.close()
    assert str(path) in err.value.message or "not a" in err.value.message
    if kind == "missing":
        assert not path.exists(), "the adapter must never create a database file"


async def test_unreachable_postgres_is_unreachable():
    backend = open_backend(
        "dbos+postgresql://nobody:secret@127.0.0.1:1/nothing?call_timeout_s=10",
        MemoryPauseLedger(),
    )
    try:
        with pytest.raises(Unreachable) as err:
            await backend.start()
    finally:
        await backend.close()
    assert "secret" not in err.value.message and "secret" not in backend.url
