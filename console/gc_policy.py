"""Keep Python's full garbage collections off the key path (the TUI) and off the beat path
(the gateway).

A fleet of 10,000 runs is a few hundred thousand objects the cyclic collector tracks (every
``Run`` model is a dozen: its dict, lists, nested models), and at 1,000 heartbeat events a
second the whole fleet is replaced every ten seconds. CPython (3.11) runs a full collection
whenever the objects promoted since the last one reach a quarter of those that survived it:
under that churn, one every 1.5-3 s, each walking the whole heap, 160-450 ms on the benchmark
machine, during which no key is handled (``benchmarks/tui_render.py``: most of the child's CPU
and every slow key press).

So, once a second (the app's tick), whatever survived the young generations is frozen
(``gc.freeze``: moved to the permanent generation, which collections skip). Nothing is lost
by it: a run replaced by a newer event is freed by reference counting, frozen or not (models
hold no cycles). Only cyclic garbage made of frozen objects would stay; so when the frozen
count has grown well past what it was after the last full collection, the heap is unfrozen and
collected once (one pause, rare: it only grows by leaked cycles and by the fleet itself).
Counting frozen objects walks them all (``gc.get_freeze_count``: ~10-25 ms at 10,000 runs),
so that check runs once a minute, not every tick.

The gateway (``console.gateway.server``) has the same problem at 100,000 runs: the beat events
in its log live a few seconds, long enough to be promoted, so each collection of the middle
generation walked every event and run version of the last seconds (up to 2.5 million objects
with its thresholds: ~1 s every ~6 s at 20,000 beats/s) and full collections walked the
whole index. It freezes its survivors every second too (``young=0``: the young generation is
collected, the middle one is frozen as it is, so no collection ever walks seconds of events).
"""

from __future__ import annotations

import gc


class GcPolicy:
    """Freeze survivors each tick; a full collection only when frozen objects pile up."""

    def __init__(self, growth: float = 1.5, slack: int = 50_000, check_every: int = 60,
                 young: int = 1) -> None:
        self.growth = growth  # a full collection once frozen > growth * base + slack
        self.slack = slack
        self.check_every = check_every  # ticks between two counts of the frozen objects
        self.young = young  # the generation collected each tick before the survivors freeze
        self._ticks = 0
        self.base = 0  # frozen objects right after the last full collection
        self.full_collections = 0
        self.enabled = False

    def start(self, *, collect: bool = True) -> None:
        """One full collection now (startup, a new snapshot), then freeze everything;
        ``collect=False``: freeze what there is without collecting it first (a gateway
        started inside a larger process, say a test's, does not pay for its garbage)."""
        self.enabled = True
        if collect:
            self.full()
        else:
            gc.freeze()
            self.base = gc.get_freeze_count()

    def full(self) -> None:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.base = gc.get_freeze_count()
        self.full_collections += 1

    def rebase(self) -> None:
        """A snapshot replaced the fleet: collect fully once and freeze the new fleet (else
        the first check after it would, up to a minute later, at a random key press)."""
        if self.enabled:
            self.full()

    def tick(self) -> None:
        """Young garbage collected, survivors frozen; a full collection if due."""
        if not self.enabled:
            return
        self._ticks += 1
        if self._ticks % self.check_every == 0 and (
                gc.get_freeze_count() > self.growth * self.base + self.slack):
            self.full()
            return
        gc.collect(self.young)
        gc.freeze()

    def stop(self) -> None:
        if self.enabled:
            self.enabled = False
            gc.unfreeze()
