"""The beat fast path's liveness in one step (liveness_clock.fresh_due) agrees with the
classification and the wheel slot the general path computes (classify_liveness,
liveness_due) for every cadence, timeout and age around their edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.gateway.liveness_clock import fresh_due, liveness_due
from console.liveness import classify_liveness
from console.model import Run, RunState
from console.run_record import RunRecord

NOW = datetime(2026, 12, 4, 12, 0, 0, 250_000, tzinfo=UTC)


@pytest.mark.parametrize("interval", [None, 0.5, 1.0, 2.0, 5.0, 60.0])
@pytest.mark.parametrize("timeout", [None, 0.8, 3.0, 12.0])
def test_fresh_due_is_the_general_paths_answer(interval: float | None,
                                               timeout: float | None) -> None:
    ages = [0.0, 0.4, 0.999, 1.0, 1.5, 2.0, 2.9, 3.0, 3.01, 7.5, 7.6, 12.0, 12.5, 90.0, -3.0]
    for age in ages:
        at = NOW - timedelta(seconds=age)
        live = classify_liveness(at, NOW, interval_s=interval, timeout_s=timeout) == "running"
        run = RunRecord.of(Run(id="b:c/r", backend="b", context="c", native_id="r",
                               state=RunState.RUNNING, heartbeat_at=at,
                               heartbeat_interval_s=interval, heartbeat_timeout_s=timeout))
        got = fresh_due(at, NOW, interval, timeout)
        if live and interval:
            assert got == liveness_due(run), (age, interval, timeout)
        else:
            assert got is None, (age, interval, timeout)
