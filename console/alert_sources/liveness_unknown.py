"""``liveness_unknown``: a backend context that has not answered for longer than its poll
budget; irq cannot vouch for its runs' states (they are what the last answer said)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import at_text
from console.model import BackendHealth

MIN_BUDGET_S = 10.0


def poll_budget(poll_interval_s: float) -> float:
    """How long a context may go unanswered: three polls, and never under 10 s (a slow
    answer of a large fleet is not an outage)."""
    return max(MIN_BUDGET_S, 3.0 * poll_interval_s)


def liveness_unknown(health: Iterable[BackendHealth], budgets: Mapping[str, float],
                     started_at: datetime, now: datetime) -> list[Condition]:
    """``budgets``: ``BACKEND:CONTEXT`` -> seconds (:func:`poll_budget`); ``started_at``:
    when the gateway started (a context never answered is unknown since then)."""
    out = []
    for h in health:
        budget = budgets.get(h.key, MIN_BUDGET_S)
        last = h.last_ok_at or started_at
        silent = (now - last).total_seconds()
        if silent <= budget:
            continue
        why = f" ({h.error})" if h.error else ""
        out.append(Condition(
            kind=AlertKind.LIVENESS_UNKNOWN, subject=h.key, backend=h.backend,
            context=h.context, since=last,
            detail=f"{h.key} has not answered since {at_text(last)}{why}; its runs' states "
                   "are as last seen",
            action=f"check that {h.url or h.key} is up and reachable from the gateway",
            facts={"last_ok_at": h.last_ok_at.isoformat() if h.last_ok_at else None}))
    return out
