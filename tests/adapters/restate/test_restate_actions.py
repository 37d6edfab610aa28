"""Actions and failures on a real Restate server with a real hypercorn service: SIGKILL of the
service mid-invocation, pause/resume, cancel vs kill, retry now, and the server going down.
Executions are counted in the service's own record outside Restate."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from restate_scenarios import RestateStack, send

from backend_adapters.base import Conflict, Unreachable
from backend_adapters.restate.adapter import RestateBackend
from console.model import Run, RunState


async def until(
    adapter: RestateBackend,
    inv: str,
    check: Callable[[Run], bool],
    what: str,
    timeout_s: float = 60.0,
) -> Run:
    deadline = time.monotonic() + timeout_s
    while True:
        run = await adapter.get_run(inv)
        if check(run):
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"{inv}: no {what} within {timeout_s:g}s (last: {run})")
        await asyncio.sleep(0.1)


async def until_true(check: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        got = check()
        if isinstance(got, Awaitable):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def test_sigkill_of_service_backs_off_and_completed_steps_never_run_again(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    inv = send(stack.server.ingress_url, "IrqSteps/process", {"slow_s": 6})
    await until_true(lambda: "slow-step" in stack.lines(inv), "slow-step to start")
    steps = {s.name: s.status for s in await adapter.journal(inv)}
    assert steps == {"step-1": "completed", "step-2": "completed", "slow-step": "in_flight"}
    assert (await adapter.get_run(inv)).in_flight_step == "slow-step"

    assert stack.service.child is not None
    stack.service.child.kill()  # SIGKILL mid ctx.run
    try:
        run = await until(adapter, inv, lambda r: r.state is RunState.BACKING_OFF, "backing_off")
        assert run.details["next_retry_at"] and run.details["last_failure"]
        assert run.heartbeat_expected is False
    finally:
        stack.service.start()  # same port: the pinned deployment answers again
    # retry now, unless Restate's own next retry came while the service restarted
    with contextlib.suppress(Conflict):
        await adapter.resume(inv, reason="retry now", identity="op")
    await until(adapter, inv, lambda r: r.state is RunState.COMPLETED, "completion")
    lines = stack.lines(inv)
    assert lines.count("step-1") == 1 and lines.count("step-2") == 1  # replayed, not re-run
    assert lines.count("slow-step") == 2  # the step in flight is at-least-once
    assert lines.count("step-4") == 1


async def test_pause_waits_for_the_step_in_flight_and_resume_continues(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    inv = send(stack.server.ingress_url, "IrqSteps/process", {"slow_s": 4})
    await until_true(lambda: "slow-step" in stack.lines(inv), "slow-step to start")
    outcome = await adapter.pause(inv, reason="maintenance", identity="op")
    assert "in flight" in outcome.detail
    if "slow-step-end" not in stack.lines(inv):  # the step still runs: Restate says running
        assert (await adapter.get_run(inv)).state is RunState.PAUSING
    run = await until(adapter, inv, lambda r: r.state is RunState.PAUSED, "paused")
    assert "step-4" not in stack.lines(inv) and "slow-step-end" in stack.lines(inv)
    assert run.heartbeat_expected is False
    await adapter.resume(inv, reason="go", identity="op")
    await until(adapter, inv, lambda r: r.state is RunState.COMPLETED, "completion")
    lines = stack.lines(inv)
    assert lines.count("slow-step") == 1 and lines.count("step-4") == 1
    with pytest.raises(Conflict):
        await adapter.pause(inv, reason="too late", identity="op")


async def test_backing_off_pause_resume_is_retry_now_and_cancel_does_not_wait(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    inv = send(stack.server.ingress_url, "IrqFlaky/charge", {})
    run = await until(adapter, inv, lambda r: r.state is RunState.BACKING_OFF, "backing_off")
    assert "psp unavailable" in str(run.details["last_failure"])
    assert any("backing off after attempt 1" in w and "psp unavailable" in w for w in run.warnings)
    # one line each: Restate appends the handler's traceback to the failure message
    assert not any("\n" in w or "Traceback" in w for w in run.warnings), run.warnings
    assert stack.lines(inv).count("call-psp") == 1  # next retry is 30 s away
    await adapter.pause(inv, reason="hold", identity="op")
    run = await until(adapter, inv, lambda r: r.state is RunState.PAUSED, "paused")
    await adapter.resume(inv, reason="retry now", identity="op")
    await until_true(lambda: stack.lines(inv).count("call-psp") == 2, "the retry, now")
    await until(adapter, inv, lambda r: r.state is RunState.BACKING_OFF, "backing_off again")
    started = time.monotonic()
    outcome = await adapter.cancel(inv, reason="give up", identity="op")
    assert any(op.endswith("/resume -> 200") for op in outcome.operations)
    run = await until(adapter, inv, lambda r: r.state.terminal, "terminal", timeout_s=20)
    assert run.state is RunState.CANCELLED
    assert time.monotonic() - started < 20  # not at the next retry, 30 s later
    assert stack.lines(inv).count("before") == 1


async def test_cancel_lets_the_handler_release_but_kill_does_not(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    ingress = stack.server.ingress_url
    cancelled, killed = send(ingress, "IrqHuman/approve", {}), send(ingress, "IrqHuman/approve", {})
    for inv in (cancelled, killed):
        await until(adapter, inv, lambda r: r.state is RunState.WAITING, "waiting")
    await adapter.cancel(cancelled, reason="no longer needed", identity="op")
    await adapter.terminate(killed, reason="stuck", identity="op")
    run = await until(adapter, cancelled, lambda r: r.state.terminal, "cancel")
    assert run.state is RunState.CANCELLED and "cancelled" in run.native_state
    run = await until(adapter, killed, lambda r: r.state.terminal, "kill")
    assert run.state is RunState.TERMINATED and "killed" in run.native_state
    assert "released" in stack.lines(cancelled)
    assert "released" not in stack.lines(killed)
    for inv in (cancelled, killed):
        with pytest.raises(Conflict):
            await adapter.cancel(inv, reason="again", identity="op")
    assert RunState.TERMINATED not in {
        r.state for r in (await adapter.observe()).runs if r.native_id == cancelled
    }


async def test_server_down_is_unreachable_then_recovers(
    stack: RestateStack, adapter: RestateBackend, tmp_path: Path
) -> None:
    inv = send(stack.server.ingress_url, "IrqHuman/approve", {})
    await until(adapter, inv, lambda r: r.state is RunState.WAITING, "waiting")
    stack.server.stop()
    try:
        with pytest.raises(Unreachable):
            await adapter.observe()
        with pytest.raises(Unreachable):
            await adapter.pause(inv, reason="x", identity="op")
    finally:
        stack.server.start()
    run = await until(adapter, inv, lambda r: r.state is RunState.WAITING, "waiting again")
    assert run.interrupts
    assert any(r.native_id == inv for r in (await adapter.observe()).runs)
    await adapter.terminate(inv, reason="cleanup", identity="op")


async def test_paused_by_restate_after_max_attempts_says_why_and_resume_retries_now(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    inv = send(stack.server.ingress_url, "IrqFragile/call", {})
    # Restate paused it because its retry policy ran out: given up, not an operator's pause
    run = await until(adapter, inv, lambda r: r.state is RunState.GIVEN_UP, "given up by Restate")
    assert run.error is not None and run.error.step == "call-psp"
    assert any(
        w.startswith("paused by Restate: retries exhausted") and "psp still unavailable" in w
        for w in run.warnings
    ), run.warnings
    assert stack.lines(inv).count("call-psp") == 2
    await adapter.resume(inv, reason="retry now", identity="op")
    await until_true(lambda: stack.lines(inv).count("call-psp") == 3, "the retry, now")
    await adapter.terminate(inv, reason="cleanup", identity="op")
