"""Liveness from a heartbeat's age: pure functions over timestamps and durations.

Below ``console.model`` (it imports nothing of irq), so the model's JSON contract and the
rules in ``console.semantics`` judge liveness the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

Liveness = Literal["running", "late", "lost", "unknown"]


def late_margin(interval_s: float) -> float:
    """Slack before a missed beat counts as late: half a cadence, at least one second."""
    return max(1.0, 0.5 * interval_s)


def lost_after(interval_s: float, timeout_s: float | None) -> float:
    """Silence after which a run is lost: its heartbeat timeout; without one, five missed
    cadences."""
    return timeout_s if timeout_s and timeout_s > 0 else 5 * interval_s


def live_for(interval_s: float, timeout_s: float | None) -> float:
    """How long a beat keeps a run live (``running``): the cadence plus the margin, or the
    timeout when that comes first."""
    return min(interval_s + late_margin(interval_s), lost_after(interval_s, timeout_s))


def classify_liveness(
    heartbeat_at: datetime | None,
    now: datetime,
    *,
    interval_s: float | None,
    timeout_s: float | None,
    started_at: datetime | None = None,
) -> Liveness:
    """running -> late -> lost from the age of the last heartbeat.

    - ``late`` when the age exceeds the expected cadence plus a margin (suspected),
    - ``lost`` when it exceeds the heartbeat timeout (what the backend itself would decide);
      without a timeout, after five missed cadences.
    A run that never beat is judged from ``started_at`` the same way; with neither, unknown.
    """
    reference = heartbeat_at or started_at
    if reference is None or interval_s is None or interval_s <= 0:
        return "unknown"
    age = max(0.0, (now - reference).total_seconds())
    if age > lost_after(interval_s, timeout_s):
        return "lost"
    if age > interval_s + late_margin(interval_s):
        return "late"
    return "running"
