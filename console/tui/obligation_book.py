"""How the console orders and words obligations (the client's ``FleetView.obligations``, kept
from the snapshot and ``obligation`` events). Pure: no widgets.

Order on screen: overdue first (most overdue first), then open (due soonest first, no
deadline last), then recently closed (fulfilled or waived, newest first). An open
obligation whose deadline has passed counts as overdue at once, without waiting for the
gateway's scanner to say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from console.policy.model import Obligation, ObligationState
from console.tui.state_display import format_age

OPEN_STATES = ("open", "overdue")


def effective_state(ob: Obligation, now: datetime) -> ObligationState:
    """``overdue`` for an open obligation past its deadline; otherwise its own state."""
    if ob.state == "open" and ob.due_at is not None and ob.due_at <= now:
        return "overdue"
    return ob.state


def due_text(ob: Obligation, now: datetime, none: str = "-") -> str:
    """``in 12m``, ``overdue by 3m``, or ``none`` (no deadline, or already closed)."""
    if ob.state not in OPEN_STATES or ob.due_at is None:
        return none
    left = (ob.due_at - now).total_seconds()
    if left > 0:
        return f"in {format_age(left)}"
    return f"overdue by {format_age(-left)}"


def _closed_at(ob: Obligation) -> datetime:
    return ob.due_at or ob.created_at


def ordered(obligations: Iterable[Obligation], now: datetime) -> list[Obligation]:
    overdue: list[Obligation] = []
    open_: list[Obligation] = []
    closed: list[Obligation] = []
    for ob in obligations:
        state = effective_state(ob, now)
        (overdue if state == "overdue" else open_ if state == "open" else closed).append(ob)
    overdue.sort(key=lambda o: (o.due_at or o.created_at, o.id))
    open_.sort(key=lambda o: (o.due_at is None, o.due_at or o.created_at, o.id))
    closed.sort(key=lambda o: (_closed_at(o), o.id), reverse=True)
    return overdue + open_ + closed


def overdue_count(obligations: Iterable[Obligation], now: datetime) -> int:
    return sum(1 for o in obligations if effective_state(o, now) == "overdue")


def open_count(obligations: Iterable[Obligation]) -> int:
    return sum(1 for o in obligations if o.state in OPEN_STATES)


def policy_version(policy: Mapping[str, Any] | None) -> str | None:
    """The version of the policy the gateway enforces (its snapshot / ``policy`` event)."""
    version = (policy or {}).get("version")
    return str(version) if version else None
