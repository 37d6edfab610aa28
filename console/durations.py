"""Durations and points in time as operators type them: ``2h``, ``30m``, ``1h30m``, ``90s``,
``1d``; ``2026-12-01T20:00``, ``2026-12-01 20:00:00Z``, ``2026-12-01`` (a time without an offset
is UTC). Used by ``irq audit --since/--until`` and ``irq token create --ttl``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> timedelta:
    """``2h``, ``30m``, ``1h30m``, ``45s``, ``1d``, ``2w`` -> a positive timedelta.

    Raises ValueError naming the accepted forms."""
    body = text.strip().lower()
    pos, total = 0, 0.0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS_S[match.group(2)]
        pos = match.end()
    if not body or pos != len(body) or total <= 0:
        raise ValueError(
            f"{text!r} is not a duration; write e.g. 30s, 30m, 2h, 1h30m, 1d, 2w"
        )
    return timedelta(seconds=total)


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """A duration back from ``now`` (``2h`` = two hours ago) or an ISO date/time (UTC when it
    has no offset) -> an aware datetime."""
    body = text.strip()
    try:
        return (now or datetime.now(UTC)) - parse_duration(body)
    except ValueError:
        pass
    iso = body[:-1] + "+00:00" if body.endswith(("Z", "z")) else body
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a duration (2h, 30m, 1d) nor an ISO time "
            "(2026-12-01T20:00, 2026-12-01T20:00:00Z)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
