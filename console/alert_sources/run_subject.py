"""A condition about one run: its subject is the run id, its backend and context the run's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from console.alert_model import AlertKind, Condition
from console.run_record import RunFacts


def run_condition(kind: AlertKind, run: RunFacts, detail: str, action: str, *,
                  since: datetime | None = None, attempt: int | None = None,
                  facts: dict[str, Any] | None = None) -> Condition:
    return Condition(kind=kind, subject=run.id, detail=detail, action=action, run=run.id,
                     backend=run.backend, context=run.context, since=since, attempt=attempt,
                     facts=facts or {})


def named(run: RunFacts) -> str:
    """``name (id)`` when the run has a name, else its id."""
    return f"{run.name} ({run.id})" if run.name and run.name != run.id else run.id



def at_text(at: datetime) -> str:
    """A time in a detail line: UTC to the second. Details quote times, not ages, so an
    alert's detail changes only when its condition does (alert_evaluator.py updates it)."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
