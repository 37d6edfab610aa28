"""Shedding heartbeat-age updates before state changes, per client, when a client falls behind.

A subscriber's backlog is measured in time, not events: how long ago the oldest event it has
not been sent was published (:class:`PublishMarks`, a few marks per second from the event
log), less the wait the gateway imposes on beats anyway (``flush_interval_s``: a current
client's oldest unsent beat is about that old at each flush). A client more than
``shed_after_s`` behind that -- the gateway is overloaded, or this
client reads slowly -- is sent the state changes of its backlog and none of its beats: each
run of consecutive beat events becomes one ``shed`` marker, ``{"seq": LAST, "kind": "shed",
"data": {"from": FIRST, "beats": N}}``, so the client's sequence stays contiguous and it can
tell a shed beat from a lost event. It keeps shedding until it has been back within half
of the threshold for ``hold_s`` (5 s): a client that caught up by shedding and then took the
beats again fell behind again at once, and its state changes waited behind those beats each
time. A beat only moves a run's heartbeat time and progress
(the beat fast path, run_store.py), so what a shedding client misses is how fresh its runs'
last beats are; their next beats after it caught up bring that back.

Without this, 50 clients at 20,000 beats/s were bistable: once behind, each flush sent them
bigger frames, which put them further behind (state changes 2-15 s late). The counts go to
``/metrics`` (``irq_updates_shed``, ``irq_clients_shedding``). The defaults were set on
benchmarks/gateway_scale.py's 50-client phase (100,000 runs, 20,000 beats/s, one process
reading for all 50 clients): with 0.3 s and 2 s the clients went back and forth and state
changes waited 0.8-0.9 s at p99; with 0.15 s and 5 s, 0.21 s.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import Any

SHED_AFTER_S = 0.15  # a client this far behind (beyond the designed wait): state changes only
SHED_HOLD_S = 5.0  # ... until it has been current for this long
MARK_EVERY_S = 0.01  # at most one publish mark per this interval
MARKS_KEPT = 4_096  # ~40 s of marks at the finest spacing; older backlogs are just "old"


class PublishMarks:
    """When the event log reached which seq: ``note(seq)`` at the end of each batch of
    publishes; :meth:`age_after` says how long ago the first event after a cursor was
    published (at least)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._seqs: list[int] = []
        self._times: list[float] = []

    def note(self, seq: int) -> None:
        now = self.clock()
        if self._seqs and (seq <= self._seqs[-1] or now - self._times[-1] < MARK_EVERY_S):
            if seq > self._seqs[-1]:
                self._seqs[-1] = seq  # the same mark covers it (published "by then")
            return
        self._seqs.append(seq)
        self._times.append(now)
        if len(self._seqs) > 2 * MARKS_KEPT:
            del self._seqs[:MARKS_KEPT], self._times[:MARKS_KEPT]

    def age_after(self, cursor: int) -> float:
        """Seconds since the first mark covering seq ``cursor + 1`` (0: none yet, the event
        is newer than the last mark; the oldest mark's age when it is older than all)."""
        i = bisect.bisect_left(self._seqs, cursor + 1)
        if i >= len(self._seqs):
            return 0.0
        return max(0.0, self.clock() - self._times[i])


class BeatShedding:
    """Decides, per subscriber and per flush, whether its beats are shed; counts them."""

    def __init__(self, marks: PublishMarks, shed_after_s: float = SHED_AFTER_S,
                 hold_s: float = SHED_HOLD_S, *, designed_wait_s: float = 0.0) -> None:
        """``designed_wait_s``: how old the oldest unsent event of a client that keeps up
        is at a flush (the beats' flush interval); only the backlog beyond it counts."""
        self.marks = marks
        self.designed_wait_s = designed_wait_s
        self.shed_after_s = shed_after_s
        self.hold_s = hold_s
        self.shed = 0  # beat events not sent to a client, summed over clients
        self.episodes = 0  # times a client started shedding

    def judge(self, sub: Any) -> bool:
        """Should ``sub`` (a Subscriber: ``cursor``, ``shedding``, ``shed_until``) have its
        next events' beats shed? Sets ``sub.shedding``."""
        if self.shed_after_s <= 0:
            return False
        age = self.marks.age_after(sub.cursor) - self.designed_wait_s
        now = self.marks.clock()
        if sub.shedding:
            if age > self.shed_after_s / 2:
                sub.shed_until = now + self.hold_s
            sub.shedding = now < sub.shed_until
        elif age > self.shed_after_s:
            sub.shedding, sub.shed_until = True, now + self.hold_s
            self.episodes += 1
        return bool(sub.shedding)


def shed_marker(first: int, last: int, beats: int) -> bytes:
    """The event standing for the beat events ``first..last`` a client was not sent."""
    return (b'{"seq":%d,"kind":"shed","data":{"from":%d,"beats":%d}}' % (last, first, beats))
