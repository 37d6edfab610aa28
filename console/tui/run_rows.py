"""The fleet as rows: unified state per run, filter, sort, counts (no Textual here).

Kept incrementally: a batch of events updates only the runs it names, and a run whose sort
key or filter verdict changed moves by bisection in the sorted order (removed at its old key,
inserted at its new one) instead of re-sorting all 10,000: sorted by heartbeat age, every
beat moves its run, and a full sort per batch would keep the event loop busy when a key
arrives. The one-second tick re-judges liveness (``late``/``lost`` come from silence, not
from events).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from console.client import FleetView
from console.liveness import live_for, lost_after
from console.model import Run, RunState
from console.prices import PriceTable
from console.semantics import LIVE_STATES, unified_state
from console.tui.run_filter import FilterQuery, haystack_of
from console.tui.state_display import ATTENTION_RANK
from console.work_at_risk import cost_rate, counted_from


class SortKey(StrEnum):
    ATTENTION = "attention"
    AGE = "age"
    ID = "id"
    BACKEND = "backend"
    PROGRESS = "progress"
    UPDATED = "updated"
    #: cost held: what the held resources cost per hour at the gateway's prices (GPU units
    #: with no price table), dearest first; equal rates: the longest since its last step
    #: first -- that is the order of the money at risk, and it moves only on events
    COST = "cost"


SORT_CYCLE = tuple(SortKey)


@dataclass(slots=True)
class RunRow:
    run: Run
    state: RunState
    haystack: str
    keys: tuple[Any, ...] = ()  # sort_keys(): the key of each sort (set by the index)
    shown: bool = True
    recheck_at: float = math.inf  # epoch seconds after which silence may change the state
    #: epoch seconds of the last beat (None: never) and of the last update, for sorting
    #: (computed once per event, not once per row at every re-sort)
    beat_ts: float | None = None
    updated_ts: float = 0.0
    cost_rate: float = 0.0  # per hour of the resources held (work_at_risk.cost_rate)
    step_ts: float = math.inf  # epoch seconds of the last step (else the start)


def make_row(run: Run, state: RunState, haystack: str,
             prices: PriceTable | None = None) -> RunRow:
    beat = run.heartbeat_at
    since, _origin = counted_from(run)
    return RunRow(run, state, haystack, recheck_at=recheck_at(run, state),
                  beat_ts=beat.timestamp() if beat is not None else None,
                  updated_ts=run.updated_at.timestamp(), cost_rate=cost_rate(run, prices),
                  step_ts=since.timestamp() if since is not None else math.inf)


def recheck_at(run: Run, state: RunState) -> float:
    """When heartbeat silence could next move ``run`` on (running -> late -> lost)."""
    interval = run.heartbeat_interval_s
    if run.state not in LIVE_STATES or run.heartbeat_at is None or not interval or interval <= 0:
        return math.inf
    beat = run.heartbeat_at.timestamp()
    timeout = run.heartbeat_timeout_s
    if state is RunState.LOST:
        return math.inf
    if state is RunState.LATE:
        return beat + lost_after(interval, timeout)
    return beat + live_for(interval, timeout)


def sort_keys(row: RunRow) -> tuple[Any, ...]:
    """The row's key for every sort, in ``SORT_CYCLE`` order (each ends with the run id:
    unique, so rows bisect exactly).

    Computed once per event (a few tuples), so a new sort is one ``sorted`` over keys already
    made, not 10,000 key functions at the key press.
    """
    run = row.run
    rid = run.id
    beat = row.beat_ts
    progress = run.progress
    return (
        (ATTENTION_RANK[row.state], rid),  # SortKey.ATTENTION
        (beat is None, beat or 0.0, rid),  # AGE
        (rid,),  # ID
        (run.backend, run.context, rid),  # BACKEND
        (progress is None, progress or 0.0, rid),  # PROGRESS
        (-row.updated_ts, rid),  # UPDATED
        (-row.cost_rate, row.step_ts, rid),  # COST
    )


#: where each sort's key sits in ``RunRow.keys``
_SLOT: dict[SortKey, int] = {key: i for i, key in enumerate(SORT_CYCLE)}


def sort_value(row: RunRow, key: SortKey) -> Any:
    return sort_keys(row)[_SLOT[key]]


class RunRowIndex:
    """Rows for every run in a :class:`FleetView`, and the filtered, sorted order."""

    def __init__(self) -> None:
        self.rows: dict[str, RunRow] = {}
        self.query = FilterQuery()
        self.sort = SortKey.ATTENTION
        self.reverse = False
        self._keys: list[Any] = []  # sort keys of the shown rows, ascending (id last: unique)
        self._ids: list[str] = []  # their run ids, in the same order
        self.visible: list[str] = []  # ``_ids``, reversed when ``reverse``
        self.counts: Counter[RunState] = Counter()
        self.generation = 0  # bumped whenever ``visible`` is rebuilt
        #: (run id, new state) since the last ``drain_transitions``; first sight included
        self.transitions: list[tuple[str, RunState]] = []
        self.prices = PriceTable()  # the view's (the gateway's), for the cost sort

    def _make(self, run: Run, now: datetime) -> RunRow:
        row = make_row(run, unified_state(run, now), haystack_of(run), self.prices)
        self._judge(row)
        return row

    def _judge(self, row: RunRow) -> None:
        row.keys = sort_keys(row)
        row.shown = self.query.empty or self.query.matches(row.run, row.state, row.haystack)

    def key_of(self, row: RunRow) -> Any:
        """``row``'s key in the current sort."""
        return row.keys[_SLOT[self.sort]]

    def sync(self, view: FleetView, now: datetime, changed: Iterable[str] | None = None) -> bool:
        """Bring rows up to date with ``view`` (all runs, or only ``changed`` ids).

        Returns True when the visible order was rebuilt (False: rows changed in place).
        """
        if view.prices != self.prices:  # new prices (a welcome): every cost key changes
            self.prices, changed = view.prices, None
        if changed is None:
            old_rows = self.rows
            self.rows = {rid: self._make(run, now) for rid, run in view.runs.items()}
            for rid, row in self.rows.items():
                old = old_rows.get(rid)
                if old is None or old.state is not row.state:
                    self.transitions.append((rid, row.state))
            self.order()
            return True
        reorder = False
        for rid in changed:
            run = view.runs.get(rid)
            old = self.rows.get(rid)
            if run is None:
                if old is not None:
                    del self.rows[rid]
                    self.counts[old.state] -= 1
                    reorder = self._move(old, None) or reorder
                continue
            row = self._make(run, now)
            self.rows[rid] = row
            if old is None:
                self.counts[row.state] += 1
                self.transitions.append((rid, row.state))
            elif old.state is not row.state:
                self.counts[old.state] -= 1
                self.counts[row.state] += 1
                self.transitions.append((rid, row.state))
            reorder = self._move(old, row) or reorder
        if reorder:
            self._publish()
        return reorder

    def _move(self, old: RunRow | None, new: RunRow | None) -> bool:
        """Take ``old`` out of the shown order and put ``new`` in; True if anything moved."""
        slot = _SLOT[self.sort]
        old_key = old.keys[slot] if old is not None and old.shown else None
        new_key = new.keys[slot] if new is not None and new.shown else None
        if old_key is not None and old_key == new_key:
            return False
        if old_key is not None:
            i = bisect_left(self._keys, old_key)
            del self._keys[i]
            del self._ids[i]
        if new_key is not None:
            i = bisect_left(self._keys, new_key)
            self._keys.insert(i, new_key)
            self._ids.insert(i, new_key[-1])  # every key ends with the run id
        return old_key is not None or new_key is not None

    def retime(self, now: datetime) -> bool:
        """Re-judge liveness of every live run; True when the visible order was rebuilt."""
        changed = False
        stamp = now.timestamp()
        for rid, row in self.rows.items():
            if stamp < row.recheck_at:
                continue
            state = unified_state(row.run, now)
            row.recheck_at = recheck_at(row.run, state)
            if state is not row.state:
                self.counts[row.state] -= 1
                self.counts[state] += 1
                judged = RunRow(row.run, state, row.haystack, recheck_at=row.recheck_at,
                                beat_ts=row.beat_ts, updated_ts=row.updated_ts,
                                cost_rate=row.cost_rate, step_ts=row.step_ts)
                self._judge(judged)
                self._move(row, judged)
                self.rows[rid] = judged
                self.transitions.append((rid, state))
                changed = True
        if changed:
            self._publish()
        return changed

    def set_query(self, text: str) -> None:
        self.query = query = FilterQuery.parse(text)
        for row in self.rows.values():
            row.shown = query.empty or query.matches(row.run, row.state, row.haystack)
        self.order(count=False)

    def set_sort(self, key: SortKey, reverse: bool | None = None) -> None:
        """A new sort: the rows' keys for it are already made (``sort_keys``)."""
        self.sort = key
        if reverse is not None:
            self.reverse = reverse
        self.order(count=False)

    def order(self, count: bool = True) -> None:
        """Sort every shown row (after a snapshot, a new filter or a new sort key); the
        counts per state too, unless ``count`` is False (a new sort changes no state)."""
        rows = self.rows.values()
        if count:
            self.counts = Counter(row.state for row in rows)
        slot = _SLOT[self.sort]
        if self.query.empty:
            self._keys = sorted([r.keys[slot] for r in rows])
        else:
            self._keys = sorted([r.keys[slot] for r in rows if r.shown])
        self._ids = [key[-1] for key in self._keys]  # every key ends with the run id
        self._publish()

    def position(self, run_id: str) -> int | None:
        """Where ``run_id`` is in ``visible`` (None: not shown); by bisection, no map."""
        row = self.rows.get(run_id)
        if row is None or not row.shown or not row.keys:
            return None
        key = row.keys[_SLOT[self.sort]]
        i = bisect_left(self._keys, key)
        if i >= len(self._keys) or self._ids[i] != run_id:
            return None
        return len(self._ids) - 1 - i if self.reverse else i

    def _publish(self) -> None:
        self.visible = self._ids[::-1] if self.reverse else list(self._ids)
        self.generation += 1

    def drain_transitions(self) -> list[tuple[str, RunState]]:
        out, self.transitions = self.transitions, []
        return out

    def row(self, run_id: str) -> RunRow | None:
        return self.rows.get(run_id)

    def __len__(self) -> int:
        return len(self.rows)
