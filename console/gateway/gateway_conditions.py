"""The gateway's own condition sources, bound to its state (each source's logic is a pure
function in console/alert_sources/; this binds it to the hub, the obligation store, the
conditions the backends reported and the settings). The evaluator takes this list and any
more sources at construction (alert_evaluator.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from backend_adapters.base import Backend
from console.alert_model import Condition
from console.alert_sources.given_up import given_up
from console.alert_sources.interrupt_overdue import interrupt_overdue
from console.alert_sources.liveness_unknown import liveness_unknown, poll_budget
from console.alert_sources.no_workers import no_workers
from console.alert_sources.obligation_overdue import obligation_overdue
from console.alert_sources.retrying import retrying
from console.alert_sources.run_groups import RunGroups
from console.alert_sources.stalled import stalled
from console.gateway.alert_evaluator import ConditionSource
from console.gateway.hub import Hub
from console.gateway.obligation_store import ObligationStore
from console.leak_conditions import PricePerHour, held_too_long, leak_suspected


class GatewayConditions:
    """Built once per gateway; :meth:`sources` is what the evaluator is given. The
    evaluator calls them on a worker thread while the event loop changes the hub: each
    source reads a container as a list taken in one step (``list(d.values())`` holds the
    interpreter throughout), never iterates the live dict."""

    def __init__(self, hub: Hub, obligations: ObligationStore,
                 reported: Mapping[str, Sequence[Condition]], backends: Mapping[str, Backend],
                 *, retrying_after: int, stalled_after_s: float, started_at: datetime,
                 poll_budget_s: float | None = None,
                 paused_since: Callable[[], Mapping[str, datetime]] = dict,
                 held_too_long_after_s: float = 3600.0,
                 price_per_hour: PricePerHour | None = None) -> None:
        """``reported``: ``BACKEND:CONTEXT`` -> the conditions of its last poll (kept by the
        poll loops, background_loops.py). ``paused_since``: run id -> when irq paused it (the
        pause ledger); ``price_per_hour``: the price table (leaks and held resources' cost)."""
        self.paused_since, self.price_per_hour = paused_since, price_per_hour
        self.held_too_long_after = timedelta(seconds=held_too_long_after_s)
        self.hub, self.obligations, self.reported = hub, obligations, reported
        self.backends = backends
        self.retrying_after, self.stalled_after_s = retrying_after, stalled_after_s
        self.started_at, self.poll_budget_s = started_at, poll_budget_s
        #: the runs each run source looks at, kept by the run store as runs change
        self.live = hub.run_store.groups
        self._walking = False  # inside one_walk
        self._walked: RunGroups | None = None  # the walk of this one_walk

    def sources(self) -> list[ConditionSource]:
        return [self.given_up, self.retrying, self.no_workers, self.stalled,
                self.liveness_unknown, self.interrupt_overdue, self.obligation_overdue,
                self.leak_suspected, self.held_too_long]

    @contextlib.contextmanager
    def one_walk(self) -> Iterator[None]:
        """Within it (one evaluator tick: alert_evaluator.py), the run sources share one
        reading of the groups (run_groups.py); outside, each call reads them anew."""
        self._walking = True
        try:
            yield
        finally:
            self._walking, self._walked = False, None

    def _groups(self) -> RunGroups:
        if self._walked is not None:
            return self._walked
        groups = self.live.groups()
        if self._walking:
            self._walked = groups
        return groups

    def given_up(self) -> Iterable[Condition]:
        return given_up(self._groups().given_up)

    def retrying(self) -> Iterable[Condition]:
        return retrying(self._groups().retrying, after=self.retrying_after)

    def no_workers(self) -> Iterable[Condition]:
        return no_workers(dict(self.reported))

    def stalled(self) -> Iterable[Condition]:
        # the candidates are read from the index by id (a dict's get: safe while the loop
        # changes it)
        return stalled(self.hub.runs, self.live.progress, self.hub.clock(),
                       after_s=self.stalled_after_s)

    def liveness_unknown(self) -> Iterable[Condition]:
        budgets = {key: self.poll_budget_s or poll_budget(b.poll_interval_s)
                   for key, b in list(self.backends.items())}
        return liveness_unknown(list(self.hub.backends.values()), budgets, self.started_at,
                                self.hub.clock())

    def interrupt_overdue(self) -> Iterable[Condition]:
        return interrupt_overdue(list(self.hub.interrupts.values()), self.hub.clock())

    def obligation_overdue(self) -> Iterable[Condition]:
        return obligation_overdue(self.obligations.listing(state="overdue"), self.hub.clock())

    def leak_suspected(self) -> Iterable[Condition]:
        return leak_suspected(self._groups().leak_candidates, self.hub.clock(),
                              self.price_per_hour)

    def held_too_long(self) -> Iterable[Condition]:
        paused = self._groups().paused
        if not paused:  # the pause ledger is read only when some run is paused
            return []
        return held_too_long(paused, self.paused_since(), self.hub.clock(),
                             self.held_too_long_after, self.price_per_hour)
