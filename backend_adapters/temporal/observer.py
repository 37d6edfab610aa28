"""Observing a Temporal namespace: one poll (``observe``), runs built from what was seen, and
the reads of one run (``get_run``, ``journal``, ``heartbeats``).

A poll describes the runs whose liveness is in question first, then refreshes the listing,
then describes the runs the refresh planner picks within the request budget; runs that left
the running list are looked up, stale workers are read now and then, and interrupts whose
details the memo lacks are found by interrupt discovery, and waits in the workflows' own code
(signals, updates) by native wait discovery.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from backend_adapters.base import BackendError, NotFound, Observation, Unreachable
from backend_adapters.temporal.closed_failures import ClosedFailures
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.conventions import REPORT_MEMO_KEY
from backend_adapters.temporal.describing import WorkflowDescriber
from backend_adapters.temporal.history_journal import journal_from_history
from backend_adapters.temporal.interrupt_discovery import InterruptDiscovery
from backend_adapters.temporal.listing import WorkflowListing
from backend_adapters.temporal.native_waits import NativeWaits
from backend_adapters.temporal.observed_workflows import ObservedWorkflows, is_older_run
from backend_adapters.temporal.payloads import memo_field
from backend_adapters.temporal.request_budget import RefreshPlanner, TokenBucket
from backend_adapters.temporal.state_mapping import BACKEND, RunEvidence, run_from_evidence
from backend_adapters.temporal.task_queue_pollers import TaskQueuePollers
from backend_adapters.temporal.worker_liveness import stale_workers, workers_from_json
from console.model import Heartbeat, Interrupt, JournalStep, Run, utcnow


class TemporalObserver:
    """Polls one namespace within its request budget and builds irq runs from it."""

    def __init__(
        self,
        connection: TemporalConnection,
        config: TemporalConfig,
        bucket: TokenBucket,
        planner: RefreshPlanner,
        observed: ObservedWorkflows,
        listing: WorkflowListing,
        describer: WorkflowDescriber,
        discovery: InterruptDiscovery,
        native: NativeWaits,
        failures: ClosedFailures,
        pollers: TaskQueuePollers,
    ) -> None:
        self._connection = connection
        self._config = config
        self._bucket = bucket
        self._planner = planner
        self._observed = observed
        self._listing = listing
        self._describer = describer
        self._discovery = discovery
        self._native = native
        self._failures = failures
        self._pollers = pollers
        self._workers_checked: float | None = None

    # ------------------------------------------------------------------ focus

    def focus(self, native_ids: set[str]) -> None:
        self._observed.focus = set(native_ids)
        watch = self._connection.watch
        if watch is not None:
            watch.watch(self._observed.focus)

    @property
    def pending_refresh(self) -> set[str]:
        """Runs to describe first on the next poll (their history moved, or acted upon)."""
        return set(self._observed.dirty)

    @property
    def watched(self) -> set[str]:
        """Runs whose history is being long-polled."""
        watch = self._connection.watch
        return watch.watched if watch is not None else set()

    def staleness_s(self) -> list[float]:
        """Seconds since each running workflow's pending activities were last described."""
        return self._planner.staleness(self._observed.listed, time.monotonic())

    # ------------------------------------------------------------------ observe

    async def observe(self) -> Observation:
        observed = self._observed
        now = utcnow()
        # runs whose liveness is in question are described before the listing spends the
        # budget: whatever the poll interval, a silent run turns lost soon after the server
        # times it out
        first = self._choose_in_question(now)
        await self._describer.describe_many(first)
        missing = await self._listing.refresh(now)
        running_ids = set(observed.listed)
        self._planner.forget(running_ids)
        for wid in list(observed.described):
            if wid not in running_ids:
                del observed.described[wid]
        observed.loss_unasked &= running_ids

        # the task queues before the runs' describes: a few calls a poll (task_queue_pollers.py
        # caps them), and a queue nobody polls stops every run on it, so the bulk refresh of
        # heartbeats must not spend the budget they need (with more running workflows than the
        # budget describes in a poll, it spent all of it and no_workers never came)
        conditions = await self._pollers.conditions(observed.listed, now)
        chosen = self._choose(running_ids - set(first), now)
        await self._describer.describe_many(chosen)
        gone = await self._look_up_missing(missing, now)
        await self._failures.refresh(observed.closed)

        await self._refresh_workers(now)
        await self._discovery.fill_inbox_by_query()
        await self._native.refresh()
        watch = self._connection.watch
        if watch is not None:
            watch.watch(observed.focus & running_ids)

        runs: list[Run] = []
        interrupts: list[Interrupt] = []
        for wid, info in observed.listed.items():
            run, found = self._build(wid, info, now)
            runs.append(run)
            interrupts.extend(found)
        for wid, info in observed.closed.items():
            run, _ = self._build(wid, info, now)
            runs.append(run)
        observed.dirty -= set(chosen) | set(first)
        return Observation(
            runs=runs,
            interrupts=interrupts,
            gone=gone,
            complete=not self._listing.truncated,
            conditions=conditions,
        )

    async def _look_up_missing(self, missing: list[str], now: datetime) -> list[str]:
        """Runs that left the running list without showing up as closed: deleted or aged out.
        Returns the run ids of those that no longer exist."""
        observed = self._observed
        gone: list[str] = []
        observed.missing.update(missing)
        for wid in sorted(observed.missing):
            if wid in observed.listed or wid in observed.closed:
                observed.missing.discard(wid)
                continue
            if not self._bucket.try_take():
                break  # the rest next poll
            observed.missing.discard(wid)
            try:
                describe = await self._connection.http.describe_workflow(wid)
            except NotFound:
                gone.append(Run.make_id(BACKEND, self._config.context, wid))
                self._forget(wid)
                continue
            observed.closed[wid] = describe.get("workflowExecutionInfo") or {}
            observed.list_times[wid] = now
        return gone

    def _choose_in_question(self, now: datetime) -> list[str]:
        """Late runs and runs past their heartbeat deadline, within the budget (a quarter of
        it stays for the others, as in :meth:`RefreshPlanner.pick`)."""
        budget = max(0, int(self._bucket.available))
        if budget >= 4:
            budget -= int(budget * 0.25)
        chosen = self._planner.in_question(self._observed.listed, now=now)[:budget]
        self._bucket.charge(len(chosen))
        return chosen

    def _choose(self, running_ids: set[str], now: datetime) -> list[str]:
        budget = max(0, int(self._bucket.available))
        chosen = self._planner.pick(
            running_ids,
            focus=self._observed.focus,
            dirty=self._observed.dirty,
            now=now,
            budget=budget,
        )
        self._bucket.charge(len(chosen))
        return chosen

    async def _refresh_workers(self, now: datetime) -> None:
        mono = time.monotonic()
        if self._workers_checked is not None and (
            mono - self._workers_checked < self._config.workers_every_s
        ):
            return
        if not self._bucket.try_take():
            return
        self._workers_checked = mono
        try:
            data = await self._connection.http.workers()
        except Unreachable:
            raise
        except BackendError:  # older servers have no workers route
            self._observed.stale_workers = {}
            return
        self._observed.stale_workers = stale_workers(workers_from_json(data), now)

    # ------------------------------------------------------------------ building runs

    def _build(self, wid: str, info: dict[str, Any], now: datetime) -> tuple[Run, list[Interrupt]]:
        observed = self._observed
        described = observed.described.get(wid)
        listed_at = observed.list_times.get(wid, observed.listed_at)
        if described is not None and is_older_run(described.info, info):
            described = None  # described before a reset started the listed run
        if described is not None and is_older_run(info, described.info):
            info = described.info  # a reset started a run the list does not show yet
        elif described is not None and described.observed_at >= listed_at:
            info = {**info, **described.info}  # describe is newer than the visibility list
        elif described is not None:
            info = {**described.info, **info}
        running = info.get("status", "WORKFLOW_EXECUTION_STATUS_RUNNING") == (
            "WORKFLOW_EXECUTION_STATUS_RUNNING"
        )
        interrupts, ids = self._discovery.interrupts_of(wid, info, running=running, now=now)
        native = self._native.interrupt_of(wid, info) if running else None
        if native is not None:  # a wait in the workflow's own code (issue 22)
            interrupts.append(native)
            ids = [*ids, native.native_id]
        report = memo_field(info, REPORT_MEMO_KEY)
        lost = observed.lost.get(wid)
        evidence = RunEvidence(
            workflow_id=wid,
            info=info,
            activities=described.activities if described and running else None,
            observed_at=described.observed_at if described else None,
            interrupt_ids=ids,
            cancel_requested=wid in observed.cancel_requested,
            heartbeat_lost=lost[1] if lost else None,
            report=report if isinstance(report, dict) else None,
            last_manifest=observed.manifests.get(wid, []),
            stale_workers=observed.stale_workers,
            workflow_task_waiting_s=described.workflow_task_waiting_s if described else None,
            closed=None if running else self._failures.of(wid),
        )
        run = run_from_evidence(evidence, context=self._config.context, now=now)
        if not running:
            observed.cancel_requested.discard(wid)
        return run, interrupts

    def _forget(self, wid: str) -> None:
        self._observed.forget(wid)
        self._failures.forget(wid)
        self._discovery.forget(wid)
        self._native.forget(wid)

    # ------------------------------------------------------------------ reads

    async def get_run(self, native_id: str) -> Run:
        describe = await self._describer.describe(native_id)
        info = describe.get("workflowExecutionInfo") or {}
        if info.get("status") != "WORKFLOW_EXECUTION_STATUS_RUNNING":
            self._observed.closed[native_id] = info
            self._observed.listed.pop(native_id, None)
            await self._failures.read(native_id, info)
        elif native_id in self._observed.closed and is_older_run(
            self._observed.closed[native_id], info
        ):
            del self._observed.closed[native_id]  # a reset started a new run
        run, _ = self._build(native_id, info, utcnow())
        return run

    async def journal(self, native_id: str) -> list[JournalStep]:
        events: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(20):  # at most 20 pages of 500 events
            page = await self._connection.http.history(
                native_id, page_size=500, next_page_token=token
            )
            events.extend((page.get("history") or {}).get("events") or [])
            token = page.get("nextPageToken") or None
            if not token:
                break
        return journal_from_history(events)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        await self._describer.describe(native_id)  # NotFound goes to the caller
        return list(self._observed.samples.get(native_id, ()))
