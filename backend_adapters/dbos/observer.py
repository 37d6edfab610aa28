"""Observing a DBOS system database: one poll (``observe``), one run, one run's journal.

DBOS cannot list "changed since": each poll reads the active set, what finished since the
watermark, and the cancelled runs whose agent may still report; finished runs are reported
once per change (the gateway keeps what it was told), paused ones every poll.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dbos import WorkflowStatus

from backend_adapters.base import Observation, PauseLedger
from backend_adapters.dbos.conventions import (
    ACTIVE_STATUSES,
    ATTR_RUN,
    ATTR_STEP,
    ATTR_WAITING,
    EVENT_INTERRUPT,
)
from backend_adapters.dbos.failures import FAILED_STATUSES, Failure, read_failures
from backend_adapters.dbos.mapping import (
    BACKEND,
    attributes_of,
    interrupt_from_payload,
    journal_from_steps,
    paused_by_irq,
    run_from_status,
)
from backend_adapters.dbos.native_waits import is_helper_wait, message_interrupt, wait_notes
from backend_adapters.dbos.pause_ends import PauseEnds
from backend_adapters.dbos.queue_health import (
    NO_WORKERS_S,
    QueueHealth,
    recovered,
    recovery_retry,
)
from backend_adapters.dbos.system_database import LIST, SystemDatabase
from backend_adapters.dbos.system_tables import (
    PendingRecv,
    event_values,
    pending_recvs,
    stepped_since_dispatch,
)
from console.model import Interrupt, JournalStep, Run

#: a cancelled run's agent may report its release this long after the cancel
_SETTLE_S = 600.0


@dataclass
class _Listing:
    """One poll's workflow lists, gathered off the event loop."""

    active: list[WorkflowStatus] = field(default_factory=list)
    finished: list[WorkflowStatus] = field(default_factory=list)
    refreshed: list[WorkflowStatus] = field(default_factory=list)
    cancelled: list[WorkflowStatus] = field(default_factory=list)


#: pages of finished runs read per poll at most (5,000 runs with the default page of 200)
MAX_FINISHED_PAGES = 25


class DBOSObserver:
    """Polls one system database and builds irq runs and interrupts from it."""

    def __init__(
        self,
        database: SystemDatabase,
        ledger: PauseLedger,
        ends: PauseEnds,
        *,
        context: str,
        lookback_s: float,
        finished_limit: int,
        rescan_s: float,
        no_workers_s: float = NO_WORKERS_S,
    ) -> None:
        self._database = database
        self._queues = QueueHealth(context, threshold_s=no_workers_s)
        self._ledger = ledger
        self._ends = ends
        self._context = context
        self._lookback_s = lookback_s
        self._finished_limit = finished_limit
        self._rescan_s = rescan_s
        # finished workflows seen recently (and paused ones, however old), by workflow id
        self._finished: dict[str, WorkflowStatus] = {}
        self._watermark_ms: int | None = None  # newest completed_at seen
        self._last_rescan = 0.0
        self._reported: dict[str, tuple[str, int | None, str]] = {}  # finished runs told

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self._context, native_id)

    def _list_sync(self, since_ms: int, rescan: bool, refresh: list[str]) -> _Listing:
        """(1) the active set; (2) everything finished since the watermark (minus 2 s: DBOS
        stores 1-second timestamps on SQLite); (3) the cached CANCELLED runs whose agent may
        still report (its final report can come minutes after the cancel, and DBOS cannot
        list "changed since"); (4) now and then recent CANCELLED runs, so paused runs older
        than the lookback window stay visible (DBOS cannot filter by attributes on SQLite)."""
        client = self._database.connected()
        listing = _Listing(
            active=client.list_workflows(status=list(ACTIVE_STATUSES), sort_desc=True, **LIST)
        )
        since = datetime.fromtimestamp(since_ms / 1000 - 2.0, UTC).isoformat()
        listing.finished = self._finished_since(client, since)
        if refresh:
            listing.refreshed = client.list_workflows(workflow_ids=refresh, **LIST)
        if rescan:
            listing.cancelled = client.list_workflows(
                status="CANCELLED", limit=self._finished_limit, sort_desc=True, **LIST
            )
        return listing

    def _finished_since(self, client: Any, since: str) -> list[WorkflowStatus]:
        """Every run finished since ``since``, a page of ``finished_limit`` at a time: the
        watermark moves to the newest completion seen, so a burst larger than one page (1,000
        runs failing at once: benchmarks/bulk_retry.py) read as one page would lose the rest
        for good. Pages shifted by new completions only repeat rows (kept once by id)."""
        limit = self._finished_limit
        found: list[WorkflowStatus] = []
        for page in range(MAX_FINISHED_PAGES):
            rows = client.list_workflows(
                completed_after=since, limit=limit, offset=page * limit, sort_desc=True, **LIST
            )
            found.extend(rows)
            if len(rows) < limit:
                break
        return found

    def _events_sync(self, workflow_ids: list[str]) -> dict[str, Any]:
        """The ``irq.interrupt`` event of each workflow (absent: none), in one statement."""
        return event_values(self._database.connected(), workflow_ids, EVENT_INTERRUPT)

    def _waits_sync(self, workflow_ids: list[str]) -> dict[str, PendingRecv]:
        return pending_recvs(self._database.connected(), workflow_ids)

    def _may_wait_natively(self, status: WorkflowStatus) -> bool:
        """Running (PENDING) and paused runs may be parked in a recv of their own."""
        return status.status == "PENDING" or self._is_paused(status)

    def _add_native_wait(
        self, run: Run, status: WorkflowStatus, wait: PendingRecv | None
    ) -> Interrupt | None:
        """The run's own recv as an item of kind message (README.md, "Agents that don't use
        irq's helpers"), unless irq's helper waits in it (then that interrupt is the item)."""
        if wait is None or run.interrupts or is_helper_wait(wait):
            return None
        interrupt = message_interrupt(
            wait,
            run_id=run.id,
            workflow_name=str(status.name or ""),
            live=status.status == "PENDING",
            now_s=time.time(),
        )
        run.interrupts.append(interrupt.id)
        run.heartbeat_expected = False  # parked in a recv: nothing runs that could beat
        for action, notes in wait_notes(wait).items():
            run.action_notes.setdefault(action, []).extend(notes)
        return interrupt

    def _may_have_interrupt(self, status: WorkflowStatus) -> bool:
        """Active and paused runs, skipping those whose agent says it waits on nothing (the
        ``irq.waiting`` hint); runs that do not use irq's helpers are always read."""
        if status.status not in ACTIVE_STATUSES and not self._is_paused(status):
            return False
        attrs = attributes_of(status)
        return not (ATTR_RUN in attrs and ATTR_WAITING in attrs and not attrs.get(ATTR_WAITING))

    def _remember(self, listing: _Listing) -> None:
        for status in [*listing.cancelled, *listing.refreshed, *listing.finished]:
            if status.status not in ACTIVE_STATUSES:
                self._finished[status.workflow_id] = status
        for status in listing.finished:
            completed = status.completed_at or 0
            if completed > (self._watermark_ms or 0):
                self._watermark_ms = completed
        for status in listing.active:
            self._finished.pop(status.workflow_id, None)
        horizon = (time.time() - self._lookback_s) * 1000
        for wid, status in list(self._finished.items()):
            if (status.completed_at or 0) < horizon and not self._is_paused(status):
                self._finished.pop(wid)
                self._reported.pop(wid, None)

    def _settling(self) -> list[str]:
        """Cached CANCELLED runs to re-read: paused ones, and those cancelled recently."""
        recent = (time.time() - _SETTLE_S) * 1000
        return [
            wid
            for wid, status in self._finished.items()
            if status.status == "CANCELLED"
            and ((status.completed_at or 0) >= recent or self._is_paused(status))
        ]

    def _changed(self, status: WorkflowStatus) -> bool:
        """Whether a finished run differs from what the last observation reported (finished
        runs are reported once per change; the gateway keeps what it was told)."""
        key = (
            str(status.status),
            status.updated_at,
            json.dumps(attributes_of(status), sort_keys=True, default=str),
        )
        if self._reported.get(status.workflow_id) == key:
            return False
        self._reported[status.workflow_id] = key
        return True

    def _is_paused(self, status: WorkflowStatus) -> bool:
        """CANCELLED by an irq pause (see :func:`paused_by_irq`)."""
        if status.status != "CANCELLED":
            return False
        return paused_by_irq(status, self._ledger.is_paused(self.run_id(status.workflow_id)))

    def _stepped_sync(self, workflow_ids: list[str]) -> set[str]:
        return stepped_since_dispatch(self._database.connected(), workflow_ids)

    def _to_run(
        self, status: WorkflowStatus, event: Any, *, stepped: bool = False, waiting: bool = False
    ) -> tuple[Run, Interrupt | None]:
        """``stepped`` / ``waiting``: a recovered run moved on since its latest dispatch, or
        waits in a recv (then it is not retrying: queue_health.py)."""
        run_id = self.run_id(status.workflow_id)
        interrupt = interrupt_from_payload(event, run_id=run_id)
        run = run_from_status(
            status, context=self._context, paused=self._is_paused(status), interrupt=interrupt
        )
        run.retrying = run.retrying or recovery_retry(status, stepped=stepped, waiting=waiting)
        if event is not None and interrupt is None:
            run.warnings.append(f"malformed {EVENT_INTERRUPT} event: {str(event)[:200]}")
        return run, interrupt

    async def observe(self) -> Observation:
        """Active runs and paused runs every poll; other finished runs when they change."""
        now = time.time()
        since_ms = self._watermark_ms or int((now - self._lookback_s) * 1000)
        rescan = now - self._last_rescan >= self._rescan_s
        self._ends.read_begins()
        listing = await self._database.call(self._list_sync, since_ms, rescan, self._settling())
        # before mapping: a run resumed before this read and cancelled since is cancelled
        self._ends.read_done(listing.active)
        if rescan:
            self._last_rescan = now
        self._remember(listing)
        for status in listing.active:
            self._reported.pop(status.workflow_id, None)
        statuses = [
            *listing.active,
            *(s for s in self._finished.values() if self._is_paused(s) or self._changed(s)),
        ]
        wanted = [s.workflow_id for s in statuses if self._may_have_interrupt(s)]
        events = await self._database.call(self._events_sync, wanted) if wanted else {}
        parked = [s.workflow_id for s in statuses if self._may_wait_natively(s)]
        waits = await self._database.call(self._waits_sync, parked) if parked else {}
        failures = await self._failures(statuses)
        # few: only PENDING runs DBOS recovered, in one statement
        again = [s.workflow_id for s in statuses if recovered(s)]
        stepped = await self._database.call(self._stepped_sync, again) if again else set()
        observation = Observation(
            conditions=self._queues.conditions([*listing.active, *listing.finished])
        )
        for status in statuses:
            wid = status.workflow_id
            run, interrupt = self._to_run(
                status, events.get(wid), stepped=wid in stepped, waiting=wid in waits
            )
            _add_failure(run, failures.get(wid))
            interrupt = interrupt or self._add_native_wait(run, status, waits.get(wid))
            observation.runs.append(run)
            if interrupt is not None:
                observation.interrupts.append(interrupt)
        return observation

    def _run_sync(
        self, native_id: str
    ) -> tuple[WorkflowStatus, Any, PendingRecv | None, bool]:
        status = self._database.status(native_id)
        event = None
        wait = None
        if status.status in ACTIVE_STATUSES or status.status == "CANCELLED":
            event = self._database.connected().get_event(
                native_id, EVENT_INTERRUPT, timeout_seconds=0
            )
            wait = pending_recvs(self._database.connected(), [native_id]).get(native_id)
        stepped = recovered(status) and bool(self._stepped_sync([native_id]))
        return status, event, wait, stepped

    async def get_run(self, native_id: str) -> Run:
        status, event, wait, stepped = await self._database.call(self._run_sync, native_id)
        waiting = wait is not None
        if status.status == "CANCELLED" and not self._is_paused(status):
            event = None  # a cancelled run's leftover interrupt can no longer be decided
            wait = None
        run, interrupt = self._to_run(status, event, stepped=stepped, waiting=waiting)
        if interrupt is None and self._may_wait_natively(status):
            self._add_native_wait(run, status, wait)
        _add_failure(run, (await self._failures([status])).get(native_id))
        return run

    async def _failures(self, statuses: list[WorkflowStatus]) -> dict[str, Failure]:
        """Errors of the failed and given-up runs among ``statuses`` (failures.py)."""
        if not any(str(s.status) in FAILED_STATUSES for s in statuses):
            return {}
        return await self._database.call(
            lambda: read_failures(self._database.connected(), statuses))

    def _journal_sync(self, native_id: str, ledger_paused: bool) -> list[JournalStep]:
        status = self._database.status(native_id)
        steps = self._database.connected().list_workflow_steps(native_id)
        marker = attributes_of(status).get(ATTR_STEP)
        journal = journal_from_steps(
            steps,
            native=str(status.status),
            marker=marker if isinstance(marker, dict) else None,
            paused=paused_by_irq(status, ledger_paused),
        )
        if ATTR_RUN in attributes_of(status):
            return journal
        return [_native_wait_step(step) for step in journal]

    async def journal(self, native_id: str) -> list[JournalStep]:
        ledger_paused = self._ledger.is_paused(self.run_id(native_id))
        return await self._database.call(self._journal_sync, native_id, ledger_paused)


def _add_failure(run: Run, failure: Failure | None) -> None:
    if failure is not None:
        run.error = failure.error
        run.last_step_at = failure.last_step_at or run.last_step_at


def _native_wait_step(step: JournalStep) -> JournalStep:
    """A run without irq's helpers waits in its own recv, not for an irq decision: say what
    it waits for, and that the wait re-runs nothing on recovery."""
    if step.name != "wait for decision":
        return step
    update: dict[str, Any] = {"name": "wait for message (DBOS.recv)"}
    if step.status == "in_flight":
        update["detail"] = (
            "waiting in DBOS.recv (topic not recorded by DBOS until a message arrives); "
            "re-runs nothing on recovery or resume: the recv waits again until its "
            "journaled deadline"
        )
    return step.model_copy(update=update)
