"""The alert evaluator: a loop of its own (DESIGN.md §2) that turns conditions into durable
alerts.

Every tick it asks each condition source (a callable returning the conditions that hold now:
console/alert_sources/, and any a later part plugs in) for its conditions, keeps those of the
backend contexts this gateway observes (``owns``: on a shared journal, the contexts whose
lease it holds, so gateways never judge one condition from two views), and lets the grace
window (alert_grace.py) say which alerts to raise and which to clear. Raising is an
insert-if-absent in the journal (alert_store.py): a condition is raised once however many
gateways see it. Each change is published as an ``alert`` event: clients get it as a delta,
peers through the journal (peering.py), notifications from it (notifications.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from console.alert_model import Alert, Condition
from console.gateway.alert_grace import GraceWindow
from console.gateway.alert_store import AlertStore

log = logging.getLogger("irq.gateway.alerts")

#: a condition source: the conditions that hold now
ConditionSource = Callable[[], Iterable[Condition]]

DEFAULT_GRACE_S = 5.0
TICK_S = 1.0
#: alerts raised per tick at most: a mass condition (thousands of runs stalled at once) is
#: raised over several ticks, each a bounded amount of journal work, instead of one tick
#: that holds the journal for seconds (benchmarks/alerts.py saw 8,500 at once take 5.5 s)
MAX_RAISES_PER_TICK = 250
#: the sources may take at most 1/N of the event loop's time (N = 10)
LOOP_SHARE_INVERSE = 10.0


def context_of(item: Condition | Alert) -> str | None:
    """The ``BACKEND:CONTEXT`` a condition or an alert is about (None: none can be told)."""
    if item.backend and item.context:
        return f"{item.backend}:{item.context}"
    ref = item.run or item.subject
    head = ref.split("/", 1)[0]
    return head if ":" in head and "/" in ref else None


class AlertEvaluator:
    def __init__(self, store: AlertStore, sources: Sequence[ConditionSource], *,
                 publish: Callable[[str, dict[str, Any]], Any],
                 clock: Callable[[], datetime], grace_s: float = DEFAULT_GRACE_S,
                 owns: Callable[[str | None], bool] = lambda _key: True,
                 raised_by: str = "", tick_s: float = TICK_S,
                 one_walk: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
                 ) -> None:
        """``owns(context_key)``: whether this gateway judges conditions of that context;
        ``one_walk``: what :meth:`conditions` calls the sources within (the gateway's run
        sources share one walk of its index in it: gateway_conditions.py)."""
        self.store = store
        self.sources = list(sources)
        self.publish, self.clock, self.owns = publish, clock, owns
        self.window = GraceWindow(grace_s)
        self.raised_by = raised_by
        self.tick_s = tick_s
        self.one_walk = one_walk
        self.counters: dict[str, int] = {"raised": 0, "cleared": 0, "source_errors": 0}

    def conditions(self) -> dict[str, Condition]:
        """The conditions of every source that hold now, once per key, of owned contexts."""
        seen: dict[str, Condition] = {}
        with self.one_walk():
            for source in self.sources:
                try:
                    found = list(source())
                except Exception:  # one broken source must not silence the others
                    self.counters["source_errors"] += 1
                    log.exception("condition source %s failed",
                                  getattr(source, "__name__", source))
                    continue
                for cond in found:
                    if cond.key not in seen and self.owns(context_of(cond)):
                        seen[cond.key] = cond
        return seen

    def tick(self) -> list[Alert]:
        """One evaluation; the alerts it raised, cleared or updated (each also published)."""
        changed = self.apply(self.conditions(), self.clock())
        self._publish(changed)
        return changed

    def apply(self, seen: dict[str, Condition], now: datetime) -> list[Alert]:
        """The journal half of a tick (raise, clear, update): it touches no gateway state but
        the grace window, so :meth:`run` calls it on a worker thread, off the event loop."""
        active = {a.key: a for a in self.store.active()
                  if self.owns(context_of(a))}
        step = self.window.step(seen, active.keys(), now)
        changed: list[Alert] = []
        for cond, since in step.raise_now[:MAX_RAISES_PER_TICK]:
            self.window.raised(cond.key)
            alert = self.store.raise_alert(cond, since, now, self.raised_by)
            if alert is not None:  # None: a peer raised it a moment ago; it is open now
                self.counters["raised"] += 1
                changed.append(alert)
        for key in step.clear_now:
            self.window.cleared(key)
            cleared = self.store.clear(active[key].id, now)
            if cleared is not None:
                self.counters["cleared"] += 1
                changed.append(cleared)
        for key, alert in active.items():
            now_held = seen.get(key)
            if now_held is not None and (now_held.detail, now_held.attempt) != (
                    alert.detail, alert.attempt):
                updated = self.store.update_facts(alert.id, now_held)
                if updated is not None:
                    changed.append(updated)
        return changed

    def _publish(self, changed: list[Alert]) -> None:
        for alert in changed:
            self.publish("alert", alert.contract())

    async def run(self) -> None:
        """Tick until cancelled; a failing tick (the journal down) is logged and retried."""
        pause = self.tick_s
        while True:
            await asyncio.sleep(pause)
            try:
                # the sources walk every run: at 100,000 runs a few hundred ms, which on the
                # loop held every client's state changes that long (the 1- and 10-client
                # p99s of benchmarks/gateway_scale.py). On a worker thread the loop gets the
                # interpreter back every switch interval (server.SWITCH_INTERVAL_S, 1 ms).
                # The sources read the gateway's containers as lists taken in one step
                # (gateway_conditions.py), never iterate them while the loop changes them.
                # The journal work: off the loop too.
                started = time.perf_counter()
                seen = await asyncio.to_thread(self.conditions)
                took = time.perf_counter() - started
                self._publish(await asyncio.to_thread(self.apply, seen, self.clock()))
            except Exception as exc:
                log.warning("evaluating alerts failed: %s", exc)
                continue
            # still CPU the beats and clients need: the next tick waits long enough to keep
            # the sources under a tenth of the time; alerts come a little later, none lost
            pause = max(self.tick_s, took * LOOP_SHARE_INVERSE)
            self.counters["last_tick_ms"] = int(took * 1000)
