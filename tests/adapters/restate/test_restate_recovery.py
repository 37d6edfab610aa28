"""Failed and given-up invocations, retry and the alert facts on a real Restate server
(``recovery_services.py``: a plain restate-sdk service, no irq code). Side effects are
counted in the service's own file, per order: after a retry the journaled steps ran once.
The last test goes through a real ``irq serve``: the given-up invocation is a ``given_up``
alert (one webhook POST), and ``irq retry`` after the fix clears it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from restate_scenarios import HERE, RestateStack, send, wait_for

from backend_adapters.base import Conflict, InvalidInput
from backend_adapters.restate.adapter import RestateBackend
from backend_adapters.restate.dev_server import HypercornService
from console.alert_model import AlertKind
from console.model import Run, RunState
from console.processes import stop_process
from tests.cli.cli_harness import irq, start_gateway
from tests.support.webhook_receiver import webhook_receiver

RESTATE_APP = "recovery_services:app"
T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T | None]], what: str, timeout_s: float = 60) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        await asyncio.sleep(0.1)


async def state(adapter: RestateBackend, inv: str, wanted: RunState, timeout_s: float = 60) -> Run:
    async def check() -> Run | None:
        run = await adapter.get_run(inv)
        return run if run.state is wanted else None

    return await until(check, f"{inv} {wanted.value}", timeout_s)


def counts(stack: RestateStack, order: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for step in stack.lines(order):
        out[step] = out.get(step, 0) + 1
    return out


def broken(stack: RestateStack, order: str) -> Path:
    flag = stack.steps_file.parent / f"broken-{order}"
    flag.touch()
    return flag


async def test_given_up_shows_its_error_and_retry_resumes_with_first_steps_once(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    flag = broken(stack, "o1")
    inv = send(stack.server.ingress_url, "Orders/fulfil", {"order": "o1", "broken": str(flag)})
    run = await state(adapter, inv, RunState.GIVEN_UP)
    assert run.error is not None
    assert (run.error.type, run.error.step) == ("RuntimeError", "ship")
    assert run.error.message == "carrier API down for order o1" and run.error.at is not None
    assert run.last_step_at is not None and run.retrying is None
    assert counts(stack, "o1") == {"reserve": 1, "charge": 1, "notify": 3, "ship": 3}

    plan = await adapter.retry_plan(inv, from_step=None)
    assert (plan.steps_kept, plan.will_rerun, plan.from_step) == (
        ["reserve", "charge"], ["ship"], "ship")
    assert plan.unjournaled_effects[0] == "ship (ran before; no result was journaled)"
    assert any("outside ctx.run" in e for e in plan.unjournaled_effects)
    assert plan.operations == [f"PATCH /invocations/{inv}/resume"] and not plan.new_run

    flag.unlink()
    outcome = await adapter.retry(inv, from_step=None, request_id="k-o1", reason="carrier back",
                                  identity="op")
    assert outcome.new_native_id is None
    await state(adapter, inv, RunState.COMPLETED)
    assert counts(stack, "o1") == {"reserve": 1, "charge": 1, "notify": 4, "ship": 4}
    again = await adapter.retry(inv, from_step=None, request_id="k-o1", reason="x", identity="op")
    assert again.detail.startswith("already retried under this key")
    with pytest.raises(Conflict, match="nothing to retry"):
        await adapter.retry(inv, from_step=None, request_id="k-other", reason="x", identity="op")
    assert counts(stack, "o1")["ship"] == 4


async def test_backing_off_shows_attempts_and_irq_pause_is_not_given_up(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    flag = broken(stack, "b1")
    inv = send(stack.server.ingress_url, "Backoff/fulfil", {"order": "b1", "broken": str(flag)})

    async def retrying() -> Run | None:
        run = await adapter.get_run(inv)
        # between attempts (an attempt in progress is retrying too, with no next time)
        backing_off = run.state is RunState.BACKING_OFF
        return run if backing_off and run.retrying and run.retrying.attempt >= 3 else None

    run = await until(retrying, "a third attempt scheduled")
    assert run.state is RunState.BACKING_OFF and run.retrying is not None
    assert run.retrying.step == "ship" and run.retrying.next_attempt_at is not None
    assert "carrier API down for order b1" in run.retrying.last_error
    assert "\n" not in run.retrying.last_error
    with pytest.raises(Conflict, match="still retrying"):
        await adapter.retry_plan(inv, from_step=None)

    await adapter.pause(inv, reason="hold", identity="op")
    run = await state(adapter, inv, RunState.PAUSED)
    for _ in range(3):  # Restate's Paused event carries the failure: still irq's pause
        assert (await adapter.get_run(inv)).state is RunState.PAUSED
    with pytest.raises(Conflict, match="resume it instead"):
        await adapter.retry_plan(inv, from_step=None)

    await adapter.terminate(inv, reason="stop it", identity="op")
    await state(adapter, inv, RunState.TERMINATED)
    plan = await adapter.retry_plan(inv, from_step=None)
    assert (plan.steps_kept, plan.will_rerun, plan.new_run) == (
        ["reserve", "charge"], ["ship"], True)
    flag.unlink()
    outcome = await adapter.retry(inv, from_step=None, request_id="k-b1", reason="x", identity="op")
    assert outcome.new_native_id
    await state(adapter, outcome.new_native_id, RunState.COMPLETED)
    assert counts(stack, "b1")["reserve"] == 1 and counts(stack, "b1")["charge"] == 1


async def test_failed_invocation_restarts_as_new_from_a_chosen_step_keeping_the_prefix(
    stack: RestateStack, adapter: RestateBackend
) -> None:
    flag = broken(stack, "p1")
    inv = send(stack.server.ingress_url, "Payouts/pay", {"order": "p1", "broken": str(flag)})
    run = await state(adapter, inv, RunState.FAILED)
    assert run.error is not None and (run.error.type, run.error.step) == ("RuntimeError", "ship")
    assert "carrier API down for order p1" in run.error.message

    with pytest.raises(InvalidInput, match="no step named 'pack'"):
        await adapter.retry_plan(inv, from_step="pack")
    plan = await adapter.retry_plan(inv, from_step="charge")
    assert (plan.steps_kept, plan.will_rerun) == (["reserve"], ["charge", "ship"])
    assert "charge (ran before; its journaled result is not reused)" in plan.unjournaled_effects
    assert "ship (ran before and failed)" in plan.unjournaled_effects
    assert plan.new_run and plan.any_step
    assert plan.operations == [f"PATCH /invocations/{inv}/restart-as-new?from=2"]

    flag.unlink()
    outcome = await adapter.retry(inv, from_step="charge", request_id="k-p1", reason="x",
                                  identity="op")
    new = outcome.new_native_id
    assert new and new != inv
    await state(adapter, new, RunState.COMPLETED)
    assert counts(stack, "p1") == {"reserve": 1, "charge": 2, "notify": 3, "ship": 3}
    again = await adapter.retry(inv, from_step="charge", request_id="k-p1", reason="x",
                                identity="op")
    assert again.new_native_id == new
    with pytest.raises(Conflict, match=f"already restarted as {new}"):
        await adapter.retry(inv, from_step=None, request_id="k-p1-b", reason="x", identity="op")
    assert counts(stack, "p1")["ship"] == 3


async def test_a_killed_deployment_with_work_in_flight_is_no_workers_until_it_returns(
    stack: RestateStack, adapter: RestateBackend, tmp_path: Path
) -> None:
    env = {"IRQ_RESTATE_STEPS": str(stack.steps_file)}
    standby = HypercornService(app="recovery_services:standby_app", cwd=HERE,
                               log=tmp_path / "standby.log", env=env)
    standby.start()
    try:
        deployment = str(stack.server.register(standby.url)["id"])
        flag = broken(stack, "s1")
        inv = send(stack.server.ingress_url, "Standby/fulfil", {"order": "s1", "broken": str(flag)})
        await state(adapter, inv, RunState.BACKING_OFF)
        assert not (await adapter.observe()).conditions
        assert standby.child is not None
        standby.child.kill()
        standby.child = None

        async def no_workers() -> list[object] | None:
            found = [c for c in (await adapter.observe()).conditions
                     if c.kind is AlertKind.NO_WORKERS]
            return found or None

        [condition] = await until(no_workers, "a no_workers condition")
        assert condition.subject == f"restate:{adapter.context}/deployment/{deployment}"
        assert condition.action == f"start the service deployment at {standby.url}/"
        assert adapter.run_id(inv) in condition.facts["runs"]
        standby = HypercornService(app="recovery_services:standby_app", cwd=HERE,
                                   log=tmp_path / "standby2.log", env=env, port=standby.port)
        standby.start()

        async def cleared() -> bool:
            return not (await adapter.observe()).conditions

        await until(cleared, "the condition to clear", timeout_s=30)
        flag.unlink()
        await state(adapter, inv, RunState.COMPLETED)
    finally:
        standby.stop()


def test_a_handler_that_exhausts_its_retries_is_a_given_up_alert_until_irq_retry(
    stack: RestateStack, tmp_path: Path
) -> None:
    flag = broken(stack, "ga1")
    with webhook_receiver() as receiver:
        notify = tmp_path / "notify.toml"
        notify.write_text(receiver.notify_config(["given_up"]))
        gateway = start_gateway(tmp_path, [stack.server.backend_url(poll=0.3)],
                                extra_args=["--alert-grace", "1s", "--notify-config", str(notify)])
        try:
            env = {**gateway.env(gateway.operator), "IRQ_HOME": str(tmp_path)}

            def alerts(*extra: str) -> list[dict[str, Any]]:
                out = irq("alerts", "-o", "json", *extra, env=env)
                assert out.code == 0, out.stdout + out.stderr
                listed: list[dict[str, Any]] = json.loads(out.stdout)
                return listed

            inv = send(stack.server.ingress_url, "Orders/fulfil", {"order": "ga1",
                                                                   "broken": str(flag)})
            alert = wait_for(lambda: next((a for a in alerts() if a["kind"] == "given_up"
                                           and a["run"].endswith(f"/{inv}")), None),
                             "the given_up alert")
            run_id = alert["run"]
            assert (alert["state"], alert["backend"], alert["subject"]) == (
                "open", "restate", run_id)
            assert "RuntimeError: carrier API down for order ga1 in ship" in alert["detail"]
            assert alert["action"] == f"fix the cause, then irq retry {run_id}"
            assert alert["facts"]["error"]["step"] == "ship"
            [post] = wait_for(lambda: receiver.of_kind("given_up"), "the webhook POST")
            assert post["alert"]["id"] == alert["id"] and post["run_id"] == run_id

            flag.unlink()
            done = irq("retry", run_id, "--yes", "--reason", "carrier back", "--wait", "30",
                       "-o", "json", env=env)
            assert done.code == 0, done.stdout + done.stderr
            assert json.loads(done.stdout)["results"][0]["outcome"] == "applied"

            def cleared() -> dict[str, Any] | None:
                found = next((a for a in alerts("--all") if a["id"] == alert["id"]), None)
                return found if found is not None and found["state"] == "cleared" else None

            wait_for(cleared, "the given_up alert cleared after the retry")
            assert counts(stack, "ga1")["reserve"] == 1 and counts(stack, "ga1")["ship"] == 4
            assert [p["alert"]["id"] for p in receiver.of_kind("given_up")] == [alert["id"]]
        finally:
            stop_process(gateway.process)
