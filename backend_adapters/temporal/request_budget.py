"""The request budget: how many calls per second the adapter may send, and to which runs.

Temporal's HTTP API has no push for heartbeats: each pending activity's heartbeat is read with
one describe per workflow. With a fleet of N runs and a budget of R requests/second, each run
is refreshed about every N/R seconds. :class:`RefreshPlanner` decides who goes first:

1. runs the operator is looking at (``focus()``) and runs whose history moved (long poll);
2. runs never described;
3. runs whose last known heartbeat deadline (last heartbeat + timeout) has passed or is near,
   and runs that looked late, paused/pausing or cancelling last time (their state is moving);
4. everything else, stalest first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` banked; may run into debt by ``charge``."""

    def __init__(self, rate: float, burst: float, *, clock: object = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0 requests per second")
        self.rate = rate
        self.burst = max(1.0, burst)
        self._tokens = self.burst
        self._clock = clock if callable(clock) else time.monotonic
        self._at = self._clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    @property
    def available(self) -> float:
        self._refill()
        return self._tokens

    def try_take(self, n: float = 1.0) -> bool:
        self._refill()
        if self._tokens >= n:
            self._tokens -= n
            return True
        return False

    def charge(self, n: float = 1.0) -> None:
        """Spend tokens for a call that must be made anyway (the listing), maybe into debt."""
        self._refill()
        self._tokens -= n

    def wait_s(self, n: float = 1.0) -> float:
        """Seconds until ``n`` tokens are available."""
        self._refill()
        return max(0.0, (n - self._tokens) / self.rate)


@dataclass
class RefreshState:
    """What the planner knows about one running workflow."""

    described_at: float | None = None  # monotonic time of the last describe
    deadline_at: datetime | None = None  # last heartbeat + heartbeat timeout
    moving: bool = False  # late / pausing / cancelling / backing off last time: look again
    late: bool = False  # late or lost last time: its liveness is in question


class RefreshPlanner:
    """Orders running workflows for describe under the budget."""

    def __init__(self, *, near_deadline_s: float = 2.0) -> None:
        self.near_deadline_s = near_deadline_s
        self.states: dict[str, RefreshState] = {}

    def forget(self, keep: Iterable[str]) -> None:
        keep_set = set(keep)
        for wid in list(self.states):
            if wid not in keep_set:
                del self.states[wid]

    def mark_described(
        self,
        wid: str,
        *,
        at: float,
        deadline_at: datetime | None,
        moving: bool,
        late: bool = False,
    ) -> None:
        self.states[wid] = RefreshState(
            described_at=at, deadline_at=deadline_at, moving=moving, late=late
        )

    def look_again(self, wid: str) -> None:
        """Describe ``wid`` again soon (with the moving ones) although its own describe found
        nothing moving: e.g. a workflow about to wait for a person (its type answers signals
        or updates and it still has work pending)."""
        st = self.states.get(wid)
        if st is not None:
            st.moving = True

    def in_question(self, running: Iterable[str], *, now: datetime) -> list[str]:
        """Runs whose liveness is in question, stalest describe first.

        Late or lost at their last describe, or with a heartbeat deadline (last heartbeat +
        timeout) already past: only a new describe tells whether the server has timed them
        out, so they are described before any listing spends the budget.
        """
        out: list[tuple[float, str]] = []
        for wid in running:
            st = self.states.get(wid)
            if st is None or st.described_at is None:
                continue
            past = st.deadline_at is not None and st.deadline_at <= now
            if st.late or past:
                out.append((st.described_at, wid))
        return [wid for _, wid in sorted(out)]

    def order(
        self,
        running: Iterable[str],
        *,
        focus: set[str],
        dirty: set[str],
        now: datetime,
    ) -> list[str]:
        """All running workflow ids, most urgent first."""
        return sorted(running, key=lambda wid: self._key(wid, focus, dirty, now))

    def _key(self, wid: str, focus: set[str], dirty: set[str], now: datetime) -> tuple[int, float]:
        st = self.states.get(wid)
        described = st.described_at if st and st.described_at is not None else None
        age_rank = described if described is not None else float("-inf")
        if wid in focus or wid in dirty:
            return (0, age_rank)
        if st is None or described is None:
            return (1, 0.0)
        if st.moving:
            return (2, age_rank)
        if st.deadline_at is not None:
            remaining = (st.deadline_at - now).total_seconds()
            if remaining <= self.near_deadline_s:
                return (2, age_rank)
        return (3, age_rank)

    def pick(
        self,
        running: Iterable[str],
        *,
        focus: set[str],
        dirty: set[str],
        now: datetime,
        budget: int,
        reserve_share: float = 0.25,
    ) -> list[str]:
        """Up to ``budget`` workflows to describe now.

        Urgent ones first (watched, moved, never described, near their deadline, moving
        state), but a ``reserve_share`` of the budget always goes to the stalest of the rest,
        so quiet runs are never starved by a crowd of heartbeating ones.
        """
        if budget <= 0:
            return []
        ordered = self.order(running, focus=focus, dirty=dirty, now=now)
        urgent = [w for w in ordered if self._rank(w, focus, dirty, now) <= 2]
        reserve = int(budget * reserve_share) if budget >= 4 else 0
        chosen = urgent[: budget - reserve]
        taken = set(chosen)
        never = float("-inf")

        def staleness_key(wid: str) -> float:
            st = self.states.get(wid)
            return never if st is None or st.described_at is None else st.described_at

        for wid in sorted((w for w in ordered if w not in taken), key=staleness_key):
            if len(chosen) >= budget:
                break
            chosen.append(wid)
        return chosen

    def _rank(self, wid: str, focus: set[str], dirty: set[str], now: datetime) -> int:
        return self._key(wid, focus, dirty, now)[0]

    def staleness(self, wids: Iterable[str], now_mono: float) -> list[float]:
        """Seconds since each workflow was last described (inf when never)."""
        out: list[float] = []
        for wid in wids:
            st = self.states.get(wid)
            if st is None or st.described_at is None:
                out.append(float("inf"))
            else:
                out.append(now_mono - st.described_at)
        return out
