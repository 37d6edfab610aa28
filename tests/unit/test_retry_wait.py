"""``irq retry --wait`` on a run retried in place (a Temporal reset keeps the run's id): the
failed run as it was before the command is no outcome, even when a poll touches it again
(a new ``updated_at``, the same failure); the run running again is, and so is a new failure.
The client here is scripted (pure wait logic); the end-to-end case is
tests/adapters/temporal/test_temporal_retry_cli.py on a real Temporal server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from console.cli.wait import run_mark, wait_for_effects
from console.client import FleetView
from console.model import Run, RunState
from console.run_facts import RunError

T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
FAILED_AT = T0 - timedelta(minutes=5)


def failed_run(updated: datetime, failed_at: datetime = FAILED_AT) -> Run:
    return Run(id="temporal:dev/three", backend="temporal", context="dev", native_id="three",
               state=RunState.FAILED, updated_at=updated,
               error=RunError(type="ApplicationError", message="503", step="publish",
                              at=failed_at))


class ScriptedClient:
    """A view that turns into each of ``steps`` on successive updates."""

    def __init__(self, first: Run, steps: list[Run]) -> None:
        self.view = FleetView(runs={first.id: first})
        self._steps: Iterator[Run] = iter(steps)

    async def updates(self) -> list[object] | None:
        await asyncio.sleep(0)
        step = next(self._steps, None)
        if step is None:
            await asyncio.sleep(10)
            return None
        self.view.runs[step.id] = step
        return [step]


def waited_for(steps: list[Run], timeout_s: float = 0.5) -> tuple[str, str]:
    before = failed_run(T0)
    client = ScriptedClient(before, steps)

    async def go() -> tuple[str, str]:
        (w,) = await wait_for_effects(client, "retry", [before.id], timeout_s,  # type: ignore[arg-type]
                                      seen_before={before.id: run_mark(before)})
        return w.outcome, w.state

    return asyncio.run(go())


def test_the_replaced_run_touched_again_is_not_the_outcome_but_running_is() -> None:
    touched = failed_run(T0 + timedelta(seconds=1))  # same failure, a poll's new updated_at
    running = touched.model_copy(update={"state": RunState.RUNNING, "error": None,
                                         "updated_at": T0 + timedelta(seconds=2)})
    assert waited_for([touched, running]) == ("running", "running")


def test_only_the_old_failure_times_out() -> None:
    assert waited_for([failed_run(T0 + timedelta(seconds=1))], 0.3) == ("timed out", "failed")


def test_a_new_failure_after_the_retry_is_its_outcome() -> None:
    again = failed_run(T0 + timedelta(seconds=3), failed_at=T0 + timedelta(seconds=2))
    assert waited_for([again]) == ("ended failed", "failed")
