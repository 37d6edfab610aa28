"""The Temporal part of ``irq demo``: the extension's dev server and worker, started for real.

The adapter (from the extension's own backend URL) must see the demo agents running with
heartbeats and resource manifests, and waiting on interrupts in the common shape; a decision
reaches the agent; the waits written Temporal's way (a signal, an update) are answered and the
next of each starts; stopping by pid leaves no process behind.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from backend_adapters.base import BackendError, MemoryPauseLedger
from backend_adapters.registry import open_backend
from backend_adapters.temporal.adapter import TemporalBackend
from console.demo.launcher import DemoEnvironment, DemoExtension
from console.demo.temporal.fleet import BUILD_ID, DEPLOYMENT, demo_extension
from console.demo.temporal.lanes import LANES
from console.model import Decision, DecisionKind, Interrupt, InterruptKind, Run, RunState
from console.processes import ChildProcess, pid_alive
from console.semantics import recoverability_warnings as warnings_of


def test_extension_shape(tmp_path: Path) -> None:
    env = DemoEnvironment(
        demo_dir=tmp_path, gateway_url="ws://x", agent_url="ws://x/agent", agent_token="t"
    )
    ext = demo_extension(env)
    assert isinstance(ext, DemoExtension) and ext.name == "temporal"
    [url] = ext.backends
    assert url.startswith("temporal+http://127.0.0.1:") and url.endswith("/default")
    assert [p.name for p in ext.servers] == ["temporal"]
    assert [p.name for p in ext.agents] == ["t-worker"]
    argv = ext.servers[0].argv
    assert argv[1:3] == ["server", "start-dev"]
    assert "IrqPendingInterrupts=KeywordList" in argv
    assert argv[argv.index("--db-filename") + 1].startswith(str(tmp_path / "temporal"))
    assert url.split(":")[-1].split("/")[0] == argv[argv.index("--http-port") + 1]
    assert 4 <= len(LANES) <= 8


async def test_demo_agents_run_heartbeat_and_ask(tmp_path: Path) -> None:
    env = DemoEnvironment(
        demo_dir=tmp_path, gateway_url="ws://x", agent_url="ws://x/agent", agent_token="t"
    )
    ext = demo_extension(env)
    assert ext is not None
    started: list[ChildProcess] = []
    try:
        for server in ext.servers:
            server.start()
            started.append(server)
            deadline = time.monotonic() + 20
            while not (server.ready and server.ready()):
                assert server.exit_code() is None, server.log_tail()
                assert time.monotonic() < deadline, f"{server.name} not ready"
                await asyncio.sleep(0.2)
        for agent in ext.agents:
            agent.start()
            started.append(agent)

        backend = open_backend(ext.backends[0] + "?rps=50", MemoryPauseLedger())
        assert isinstance(backend, TemporalBackend)
        await backend.start()
        try:
            runs: dict[str, Run] = {}
            interrupts: dict[str, Interrupt] = {}
            deadline = time.monotonic() + 25
            while time.monotonic() < deadline:
                for agent in ext.agents:
                    assert agent.exit_code() is None, agent.log_tail()
                obs = await backend.observe()
                runs = {r.native_id: r for r in obs.runs}
                interrupts = {i.run_id.rsplit("/", 1)[-1]: i for i in obs.interrupts}
                beating = [
                    r
                    for r in runs.values()
                    if r.state is RunState.RUNNING and r.heartbeat_at and r.resources
                ]
                gpu_beating = any(r.native_id == "gpu-training-0001" and r.in_flight_step
                                  for r in beating)
                asked = {"support-triage-0001", "research-assistant-0001",
                         "change-approval-0001", "access-request-0001"} <= set(interrupts)
                question_waiting = (
                    "research-assistant-0001" in runs
                    and runs["research-assistant-0001"].state is RunState.WAITING
                )
                if len(beating) >= 2 and gpu_beating and asked and question_waiting:
                    break
                await asyncio.sleep(0.5)
            else:
                raise AssertionError(
                    f"not seen: runs {[(r.native_id, r.state.value) for r in runs.values()]}, "
                    f"interrupts {sorted(interrupts)}"
                )

            # one run per lane, named after its workflow type
            assert {r.name for r in runs.values()} == {lane.name for lane in LANES}
            # Worker Versioning: every lane pinned to the demo's build, but the one left
            # unpinned on purpose (so the demo still shows the version warning, once)
            pinned = {r.name: (r.version_pinned, r.app_version) for r in runs.values()}
            assert pinned == {
                lane.name: (lane.name != "eval-runner", f"{DEPLOYMENT}:{BUILD_ID}")
                for lane in LANES
            }, pinned
            unpinned = [r.name for r in runs.values()
                        if any("version not pinned" in w for w in warnings_of(r))]
            assert unpinned == ["eval-runner"], unpinned
            gpu = runs["gpu-training-0001"]
            assert gpu.state is RunState.RUNNING and gpu.in_flight_step
            assert gpu.heartbeat_timeout_s == 10.0 and gpu.progress is not None
            policies = {r.kind: r.on_pause for r in gpu.resources}
            assert policies["gpu"] == "keep" and policies["lock"] == "release"
            assert all(r.state == "held" for r in gpu.resources)

            refund = interrupts["support-triage-0001"]
            assert refund.action == "issue_refund" and refund.args_schema
            assert {d.value for d in refund.allowed_decisions} == {"approve", "edit", "reject"}
            question = interrupts["research-assistant-0001"]
            assert question.action == "ask_user"
            assert {d.value for d in question.allowed_decisions} == {"respond", "reject"}
            assert runs["research-assistant-0001"].state is RunState.WAITING

            # a wait written Temporal's way (a signal and wait_condition, no irq code): found
            # from Temporal alone, answered with the signal, the migration then applied
            change = interrupts["change-approval-0001"]
            assert change.kind is InterruptKind.SIGNAL
            [handler] = change.handlers
            assert handler.name == "send_approval" and handler.kind == "signal"
            assert handler.args_schema and handler.args_schema["required"] == [
                "approved", "approver"]
            await backend.decide(
                change,
                Decision(kind=DecisionKind.RESPOND, handler="send_approval",
                         response={"approved": True, "approver": "alice"}),
                idempotency_key="test-signal-1",
                identity="test",
            )
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                run = await backend.get_run("change-approval-0001")
                if run.state is RunState.COMPLETED:
                    break
                await asyncio.sleep(0.3)
            else:
                raise AssertionError(f"the approval did not finish: {run.contract()}")
            steps = [step.name for step in await backend.journal("change-approval-0001")]
            assert "apply_migration (activity 2)" in steps, steps  # approved: it ran

            # the same with an update (its validator's own rule, its return value)
            await _answer_the_access_request(backend, interrupts["access-request-0001"])

            # the fleet starts the next of each wait soon after (Lane.restart_s), waiting again
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                obs = await backend.observe()
                waits = {i.run_id.rsplit("/", 1)[-1]: i.kind for i in obs.interrupts}
                if {"change-approval-0002", "access-request-0002"} <= set(waits):
                    break
                await asyncio.sleep(0.5)
            else:
                raise AssertionError(f"the next waits did not start: {sorted(waits)}")
            assert waits["change-approval-0002"] is InterruptKind.SIGNAL
            assert waits["access-request-0002"] is InterruptKind.UPDATE

            # an answer reaches the agent: it goes on writing the report
            await backend.decide(
                question,
                Decision(kind=DecisionKind.RESPOND, response="cost"),
                idempotency_key="test-respond-1",
                identity="test",
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                run = await backend.get_run("research-assistant-0001")
                if run.in_flight_step and run.in_flight_step.startswith("write_report"):
                    break
                await asyncio.sleep(0.3)
            else:
                raise AssertionError(f"the agent did not go on: {run.contract()}")
        finally:
            await backend.close()
    finally:
        for process in reversed(started):
            process.stop(grace_s=10)
    for process in started:
        assert process.pid is not None and not pid_alive(process.pid), process.name
        assert process.exit_code() == 0, (process.name, process.log_tail())


async def _answer_the_access_request(backend: TemporalBackend, access: Interrupt) -> None:
    """access-request waits in wait_condition for its approve_access update (no irq code):
    listed as kind update with the update's schema; someone off call is refused by the
    workflow's validator (the wait stays open), someone on call is its answer."""
    assert access.kind is InterruptKind.UPDATE
    assert access.title == "access-request waits for approve_access"
    [handler] = access.handlers
    assert handler.name == "approve_access" and handler.kind == "update"
    assert handler.args_schema and handler.args_schema["required"] == ["approved", "approver"]
    assert access.deadline_at is not None  # wait_condition's timeout timer
    try:
        await backend.decide(
            access,
            Decision(kind=DecisionKind.RESPOND, response={"approved": True, "approver": "eve"}),
            idempotency_key="test-update-eve", identity="test",
        )
    except BackendError as exc:
        assert re.search(r"'eve' is not on call", exc.message), exc.message
    else:
        raise AssertionError("the validator let someone off call grant access")
    outcome = await backend.decide(
        access,
        Decision(kind=DecisionKind.RESPOND,
                 response={"approved": True, "approver": "bob", "hours": 2}),
        idempotency_key="test-update-bob", identity="test",
    )
    assert "'granted by bob'" in outcome.detail, outcome.detail
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run = await backend.get_run("access-request-0001")
        if run.state is RunState.COMPLETED:
            break
        await asyncio.sleep(0.3)
    else:
        raise AssertionError(f"the access request did not finish: {run.contract()}")
    steps = [step.name for step in await backend.journal("access-request-0001")]
    assert "open_access (activity 2)" in steps, steps  # granted: the access was opened
