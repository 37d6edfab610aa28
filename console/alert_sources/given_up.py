"""``given_up``: runs the engine stopped retrying (RunState.GIVEN_UP, set by the adapters:
Restate paused the invocation, DBOS past its recovery limit, a Temporal activity paused)."""

from __future__ import annotations

from collections.abc import Iterable

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import named, run_condition
from console.model import RunState
from console.run_record import RunFacts


def given_up(runs: Iterable[RunFacts]) -> list[Condition]:
    out = []
    for run in runs:
        if run.state is not RunState.GIVEN_UP:
            continue
        why = ""
        if run.error is not None:
            where = f" in {run.error.step}" if run.error.step else ""
            why = f": {run.error.type}{': ' if run.error.type and run.error.message else ''}" \
                  f"{run.error.message}{where}"
        out.append(run_condition(
            AlertKind.GIVEN_UP, run, f"{named(run)}: the engine stopped retrying{why}",
            f"fix the cause, then irq retry {run.id}",
            since=run.error.at if run.error is not None else None,
            facts={"error": run.error.contract()} if run.error is not None else {}))
    return out
