"""The console's copy of the gateway's obligations (and the policy version it runs), kept from
the snapshot's ``obligations`` and ``obligation`` / ``policy`` events. Pure: no widgets.

Order on screen: overdue first (most overdue first), then open (due soonest first, no
deadline last), then recently closed (fulfilled or waived, newest first). An open
obligation whose deadline has passed counts as overdue at once, without waiting for the
gateway's scanner to say so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from console.policy.model import Obligation, ObligationState
from console.tui.state_display import format_age

CLOSED_KEPT = 500  # fulfilled / waived obligations kept in memory (the gateway sends 200)
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


class ObligationBook:
    """Obligations by id, and the version of the policy the gateway enforces."""

    def __init__(self) -> None:
        self.obligations: dict[str, Obligation] = {}
        self.policy_version: str | None = None
        self.policy_source: str = ""

    def load_snapshot(self, frame: dict[str, Any]) -> None:
        self.obligations = {}
        for raw in frame.get("obligations") or []:
            self._upsert(raw)
        policy = frame.get("policy")
        if isinstance(policy, dict):
            self._policy(policy)

    def apply(self, kind: object, data: object) -> bool:
        """Apply one event; True when it was an obligation or policy event."""
        if not isinstance(data, dict):
            return False
        if kind == "obligation":
            self._upsert(data)
            self._trim()
            return True
        if kind == "policy":
            self._policy(data)
            return True
        return False

    def _upsert(self, raw: object) -> None:
        try:
            ob = Obligation.model_validate(raw)
        except ValidationError:
            return  # a malformed obligation never hides the others
        self.obligations[ob.id] = ob

    def _policy(self, data: dict[str, Any]) -> None:
        version = data.get("version")
        self.policy_version = str(version) if version else None
        self.policy_source = str(data.get("source") or "")

    def _trim(self) -> None:
        closed = [o for o in self.obligations.values() if o.state not in OPEN_STATES]
        if len(closed) <= CLOSED_KEPT:
            return
        closed.sort(key=_closed_at)
        for ob in closed[: len(closed) - CLOSED_KEPT]:
            del self.obligations[ob.id]

    def ordered(self, now: datetime) -> list[Obligation]:
        overdue: list[Obligation] = []
        open_: list[Obligation] = []
        closed: list[Obligation] = []
        for ob in self.obligations.values():
            state = effective_state(ob, now)
            (overdue if state == "overdue" else open_ if state == "open" else closed).append(ob)
        overdue.sort(key=lambda o: (o.due_at or o.created_at, o.id))
        open_.sort(key=lambda o: (o.due_at is None, o.due_at or o.created_at, o.id))
        closed.sort(key=lambda o: (_closed_at(o), o.id), reverse=True)
        return overdue + open_ + closed

    def overdue_count(self, now: datetime) -> int:
        return sum(1 for o in self.obligations.values() if effective_state(o, now) == "overdue")

    def open_count(self) -> int:
        return sum(1 for o in self.obligations.values() if o.state in OPEN_STATES)
