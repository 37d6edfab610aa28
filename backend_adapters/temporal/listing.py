"""The running / recently closed listing of a namespace, kept up to date within the budget."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.interrupt_discovery import InterruptDiscovery
from backend_adapters.temporal.observed_workflows import (
    ObservedWorkflows,
    is_older_run,
    newest_runs,
)
from backend_adapters.temporal.payloads import parse_time
from backend_adapters.temporal.superseded_runs import SupersededRuns
from backend_adapters.temporal.visibility import RUNNING_QUERY, Visibility

#: visibility is updated asynchronously: incremental queries look back this far
LIST_SLACK_S = 10.0
#: the most of the request budget the incremental listing may spend: at a fast poll it runs
#: less often than every poll, so describes (the only source of heartbeat facts) always get
#: the rest
LISTING_SHARE = 0.5
_CLOSED_QUERY = "ExecutionStatus != 'Running' AND CloseTime > '{}'"
#: closed runs an operator still has to look at (``failed_window``): kept far longer than
#: completed ones, which need nothing and would crowd the listing
_ATTENTION_QUERY = (
    "ExecutionStatus IN ('Failed','TimedOut','Terminated','Canceled') AND CloseTime > '{}'"
)
ATTENTION_STATUSES = frozenset(
    f"WORKFLOW_EXECUTION_STATUS_{s}" for s in ("FAILED", "TIMED_OUT", "TERMINATED", "CANCELED")
)


class WorkflowListing:
    """Full lists every ``relist_s``, cheap incremental queries in between."""

    def __init__(
        self,
        config: TemporalConfig,
        visibility: Visibility,
        discovery: InterruptDiscovery,
        observed: ObservedWorkflows,
        superseded: SupersededRuns,
    ) -> None:
        self._config = config
        self._superseded = superseded
        self._visibility = visibility
        self._discovery = discovery
        self._observed = observed
        self._full_listed_mono: float | None = None
        self._listed_mono: float | None = None  # the last listing, full or incremental
        self.truncated = False  # the last full list stopped at max_runs

    async def refresh(self, now: datetime) -> list[str]:
        """Bring the running / recently closed listing up to date.

        Every ``relist_s`` a full list of running workflows (heavy on the server for large
        fleets: ~1 s for 1,000 runs on the dev server); in between three cheap queries: runs
        started since the last listing, runs closed since, and runs with pending interrupts
        (irq's search attribute). Returns workflow ids that left the full running list
        without showing up as closed (deleted, or closed before the window).
        """
        mono = time.monotonic()
        window_start = now - timedelta(seconds=self._config.closed_window_s)
        attention_start = now - timedelta(seconds=self._config.failed_window_s)
        missing: list[str] = []
        full = self._full_listed_mono is None or (
            mono - self._full_listed_mono >= self._config.relist_s
        )
        if (
            not full
            and self._listed_mono is not None
            and (mono - self._listed_mono < self.interval_s())
        ):
            return missing  # listed recently enough for the budget: describes go first
        self._listed_mono = mono
        if full:
            missing = await self._full(now, window_start, attention_start)
            self._full_listed_mono = mono
        else:
            await self._incremental(now)
        observed = self._observed
        for wid, info in list(observed.closed.items()):
            closed_at = parse_time(info.get("closeTime"))
            if closed_at is None or closed_at >= window_start:
                continue
            if info.get("status") not in ATTENTION_STATUSES or closed_at < attention_start:
                del observed.closed[wid]
        await self._superseded.drop(observed.closed, window_start, attention_start)
        observed.listed_at = now
        return missing

    async def _full(
        self, now: datetime, window_start: datetime, attention_start: datetime
    ) -> list[str]:
        """The full list of running workflows and the closed windows; the ids that left."""
        config, visibility, observed = self._config, self._visibility, self._observed
        running = await visibility.list(visibility.query(RUNNING_QUERY), limit=config.max_runs)
        self.truncated = visibility.last_truncated
        closed: list[dict[str, Any]] = []
        if config.closed_window_s > 0:  # as many as running ones: a bulk retry of 1,000
            # failed runs (benchmarks/bulk_retry.py) saw 500 of them with a fixed 500
            closed = await visibility.list(
                visibility.query(_CLOSED_QUERY.format(window_start.isoformat())),
                limit=config.max_runs,
            )
        if config.failed_window_s > config.closed_window_s:  # one call more per full list
            closed += await visibility.list(
                visibility.query(_ATTENTION_QUERY.format(attention_start.isoformat())),
                limit=config.max_runs,
            )
        previously = set(observed.listed)
        # a workflow id has one run per reset / continue-as-new: the list gives the newest
        # first, and the newest is the one irq shows (a reset run listed with its failed
        # predecessor's state was the "failed for ~10 s after a reset" bug)
        observed.listed = newest_runs(running)
        observed.closed = {
            wid: e
            for wid, e in newest_runs(closed).items()
            if wid not in observed.listed or is_older_run(observed.listed[wid], e)
        }
        for wid in set(observed.closed) & set(observed.listed):
            del observed.listed[wid]
        observed.list_times = {wid: now for wid in (*observed.listed, *observed.closed)}
        return [w for w in previously - set(observed.listed) if w not in observed.closed]

    async def _incremental(self, now: datetime) -> None:
        """Runs started and closed since the last listing, and the waiting ones."""
        config, visibility, observed = self._config, self._visibility, self._observed
        since = (observed.listed_at - timedelta(seconds=LIST_SLACK_S)).isoformat()
        started = await visibility.list(
            visibility.query(f"{RUNNING_QUERY} AND StartTime > '{since}'"),
            limit=config.max_runs,
        )
        closed = await visibility.list(
            visibility.query(_CLOSED_QUERY.format(since)), limit=config.max_runs
        )
        for wid, info in newest_runs(started).items():
            if wid in observed.closed and is_older_run(info, observed.closed[wid]):
                continue
            observed.closed.pop(wid, None)  # a reset started a new run of a closed one
            observed.listed[wid] = info
            observed.list_times[wid] = now
        await self._discovery.refresh_waiting(now)
        for wid, info in newest_runs(closed).items():
            if wid in observed.listed and is_older_run(info, observed.listed[wid]):
                continue  # the run a reset replaced
            observed.listed.pop(wid, None)
            observed.closed[wid] = info
            observed.list_times[wid] = now

    def interval_s(self) -> float:
        """Seconds between incremental listings: their calls stay within LISTING_SHARE."""
        calls = 3 if self._discovery.search_attribute_ok else 2
        return calls / (self._config.rps * LISTING_SHARE)
