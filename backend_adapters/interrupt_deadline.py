"""An agent's own deadline on an interrupt it raises through a helper (``deadline=``).

Every helper that raises an interrupt (DBOS ``AgentRun.interrupt``, Temporal
``Interrupts.ask``, Restate ``ask``, LangGraph ``ask`` / ``inbox_request``) takes
``deadline: timedelta | float | None`` (a duration; a float is seconds) and publishes the
absolute ``deadline_at`` (UTC ISO) counted from the interrupt's creation time, computed where
the helper computes ``created_at`` (``workflow.now()`` in Temporal workflow code, inside the
journaled ``ctx.run`` in Restate) so a replay publishes the same value.

Each adapter reads it back with :func:`deadline_at_of`. An agent's payload is untrusted: a
missing or malformed ``deadline_at`` is ignored and never hides the interrupt (the rule of
``InterruptPolicy.from_payload``). Past it the gateway raises ``interrupt_overdue``; when a
policy rule or a timer on the wait also sets one, the earliest wins (``Interrupt``'s
validator in ``console/model.py``).

Pure: imported by workflow code (Temporal's sandbox) and by agents that import no irq server.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Deadline", "deadline_at_iso", "deadline_at_of", "deadline_delta"]

#: what a helper's ``deadline=`` takes: a duration, or seconds
Deadline = timedelta | float | int


def deadline_delta(deadline: Deadline | None) -> timedelta | None:
    """``deadline`` as a duration; None for None. A negative, infinite or non-numeric value
    is the caller's mistake and raises ``ValueError`` where the interrupt is raised."""
    if deadline is None:
        return None
    if isinstance(deadline, timedelta):
        delta = deadline
    elif isinstance(deadline, int | float) and not isinstance(deadline, bool):
        if not math.isfinite(deadline):
            raise ValueError(f"deadline must be finite, got {deadline!r}")
        delta = timedelta(seconds=deadline)
    else:
        raise ValueError(f"deadline must be a timedelta or seconds, got {deadline!r}")
    if delta < timedelta(0):
        raise ValueError(f"deadline must not be negative, got {deadline!r}")
    return delta


def deadline_at_iso(created_at: datetime, deadline: Deadline | None) -> str | None:
    """The payload's ``deadline_at``: ``created_at`` + ``deadline`` in UTC ISO, or None."""
    delta = deadline_delta(deadline)
    if delta is None:
        return None
    created = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    return (created + delta).astimezone(UTC).isoformat()


def deadline_at_of(value: Any) -> datetime | None:
    """A payload's ``deadline_at`` (ISO text; without an offset it is UTC); None when absent
    or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
