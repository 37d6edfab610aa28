"""``retrying``: a step failed ``after`` times or more in a row and the engine is backing off
(``Run.retrying``, set by the adapters from the engine's attempt count)."""

from __future__ import annotations

from collections.abc import Iterable

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import named, run_condition
from console.run_record import RunFacts

DEFAULT_AFTER = 3  # attempts (config ``retrying_after``)


def retrying(runs: Iterable[RunFacts], *, after: int = DEFAULT_AFTER) -> list[Condition]:
    out = []
    for run in runs:
        retry = run.retrying
        if retry is None or retry.attempt < after or run.state.terminal:
            continue
        nxt = (f", next attempt at {retry.next_attempt_at.isoformat(timespec='seconds')}"
               if retry.next_attempt_at else "")
        last = f", last error: {retry.last_error}" if retry.last_error else ""
        out.append(run_condition(
            AlertKind.RETRYING, run,
            f"{named(run)}: step {retry.step} at attempt {retry.attempt}{last}{nxt}",
            f"look at the step's error; irq show {run.id}", attempt=retry.attempt,
            facts={"retrying": retry.contract()}))
    return out
