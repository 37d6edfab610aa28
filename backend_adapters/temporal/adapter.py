"""The Temporal adapter: observe and act on workflows through Temporal's HTTP API (httpx only).

- observe(): one paged visibility list of running workflows (memo + search attributes carry
  irq's pending interrupts), one page of recently closed ones, and describes of pending
  activities under a request budget (``?rps=``), focused and near-deadline runs first;
- pause / resume = pause / unpause every pending activity of the workflow (per-workflow
  activity routes), cancel = request cancellation, terminate = terminate;
- decide() = the ``irq_decide`` update with ``updateId`` = the command's idempotency key.

See ``README.md`` in this package for the conventions and the state table.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from backend_adapters.base import (
    ActionCapability,
    ActionOutcome,
    BackendError,
    BackendFactory,
    BackendURL,
    Capabilities,
    Conflict,
    InvalidInput,
    NotFound,
    Observation,
    PauseLedger,
    Unreachable,
    Unsupported,
)
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.conventions import (
    ERROR_ACTIVITY_CANCELLED,
    ERROR_INVALID_DECISION,
    ERROR_NOT_PENDING,
    MEMO_KEY,
    QUERY_NAME,
    REPORT_MEMO_KEY,
    SEARCH_ATTRIBUTE,
    UPDATE_NAME,
    pending_interrupts_query,
    progress_fraction,
    update_input,
)
from backend_adapters.temporal.history_watch import HistoryWatch
from backend_adapters.temporal.http_api import QueryFailed, TemporalHttp
from backend_adapters.temporal.payloads import (
    decode_payloads,
    memo_field,
    parse_time,
    search_attribute,
)
from backend_adapters.temporal.request_budget import RefreshPlanner, TokenBucket
from backend_adapters.temporal.state_mapping import (
    BACKEND,
    ActivityView,
    RunEvidence,
    activities_from_describe,
    activity_state,
    heartbeat_loss_from_history,
    interrupts_from_shape,
    resources_from_details,
    run_from_evidence,
)
from backend_adapters.temporal.worker_liveness import stale_workers, workers_from_json
from console.decision_check import decision_problem
from console.model import (
    Action,
    Decision,
    Heartbeat,
    Interrupt,
    JournalStep,
    Resource,
    Run,
    RunState,
    split_run_id,
    utcnow,
)

RUNNING_QUERY = "ExecutionStatus = 'Running'"
#: visibility is updated asynchronously: incremental queries look back this far
LIST_SLACK_S = 10.0
#: the most of the request budget the incremental listing may spend: at a fast poll it runs
#: less often than every poll, so describes (the only source of heartbeat facts) always get
#: the rest
LISTING_SHARE = 0.5
_MOVING = {
    RunState.LATE,
    RunState.LOST,
    RunState.PAUSING,
    RunState.CANCELLING,
    RunState.BACKING_OFF,
}


@dataclass
class _Described:
    """The last describe of one workflow."""

    info: dict[str, Any]
    activities: list[ActivityView]
    observed_at: datetime
    observed_mono: float
    workflow_task_waiting_s: float | None = None


@dataclass
class _Inbox:
    """Interrupts found by query for runs whose memo lacks them (cache per pending-id set)."""

    ids: tuple[str, ...]
    items: list[Any] = field(default_factory=list)


class TemporalBackend:
    """One Temporal namespace as an irq backend context."""

    name = BACKEND

    def __init__(self, config: TemporalConfig, ledger: PauseLedger | None = None) -> None:
        self.config = config
        self.context = config.context
        self.url = config.display_url
        self.poll_interval_s = config.poll_interval_s
        self._ledger = ledger
        self._http: TemporalHttp | None = None
        self.bucket = TokenBucket(
            config.rps, burst=config.rps * max(2.0, 2 * config.poll_interval_s)
        )
        self.planner = RefreshPlanner(near_deadline_s=max(2.0, config.poll_interval_s))
        self._watch: HistoryWatch | None = None
        self._listed: dict[str, dict[str, Any]] = {}
        self._closed: dict[str, dict[str, Any]] = {}
        self._described: dict[str, _Described] = {}
        self._manifests: dict[str, list[Resource]] = {}
        self._lost: dict[str, tuple[int, dict[str, Any] | None]] = {}
        self._cancel_requested: set[str] = set()
        self._missing: set[str] = set()  # left the running list, fate unknown yet
        self._focus: set[str] = set()
        self._dirty: set[str] = set()
        self._samples: dict[str, deque[Heartbeat]] = {}
        self._inbox: dict[str, _Inbox] = {}
        self._stale_workers: dict[str, float] = {}
        self._workers_checked: float | None = None
        self._search_attribute_ok = True
        self._listed_at = utcnow()
        self._list_times: dict[str, datetime] = {}
        self._full_listed_mono: float | None = None
        self._listed_mono: float | None = None  # the last listing, full or incremental
        self._loss_unasked: set[str] = set()  # activity vanished, history not read yet
        self.server_version = ""
        self.truncated = False  # the last full list stopped at max_runs
        self._last_list_truncated = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def http(self) -> TemporalHttp:
        if self._http is None:
            raise Unreachable(f"temporal adapter for {self.url} not started")
        return self._http

    async def start(self) -> None:
        if self._http is None:
            self._http = TemporalHttp(
                self.config.base_url,
                self.config.namespace,
                api_key=self.config.api_key,
                headers=self.config.headers,
                verify=self.config.verify,
                timeout_s=self.config.timeout_s,
            )
            self._watch = HistoryWatch(
                self._http, self._mark_dirty, max_watched=self.config.watch_max
            )
        info = await self.http.system_info()
        self.server_version = str(info.get("serverVersion") or "")
        try:
            await self.http.describe_namespace()
        except NotFound as exc:
            raise Unreachable(
                f"temporal namespace {self.config.namespace!r} not found at {self.url}"
            ) from exc
        try:
            attrs = await self.http.search_attributes()
        except BackendError:
            attrs = {}
        custom = attrs.get("customAttributes") or {}
        self._search_attribute_ok = SEARCH_ATTRIBUTE in custom

    async def close(self) -> None:
        if self._watch is not None:
            await self._watch.close()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def capabilities(self) -> Capabilities:
        base = "/api/v1/namespaces/{ns}/workflows/{wid}"
        return Capabilities(
            backend=BACKEND,
            native_heartbeats=True,
            actions={
                Action.PAUSE: ActionCapability(
                    True,
                    "pause every pending activity of the workflow: the running attempt stops at "
                    "its next heartbeat (it fails with ActivityPause, no retry is consumed), "
                    "resources marked on_pause=release are released, the rest stay held; the "
                    "workflow itself keeps running (timers, signals, updates)",
                    (f"POST {base}/activities/{{aid}}/pause (each pending activity)",),
                ),
                Action.RESUME: ActionCapability(
                    True,
                    "unpause the paused activities: the next attempt starts at once and "
                    "continues from the last heartbeat details. On a lost run (its worker "
                    "went silent): an activity waiting for its retry is reset (retried now "
                    "as attempt 1 from the last heartbeat details); one the server still "
                    "counts as running is retried at its heartbeat timeout; either way the "
                    "attempt starts when a worker polls the task queue",
                    (f"POST {base}/activities/{{aid}}/unpause (each paused activity)",),
                    operations_when=MappingProxyType(
                        {
                            RunState.LOST: (
                                f"POST {base}/activities/{{aid}}/reset (each activity waiting "
                                "for a retry after its heartbeat timeout: retried now as attempt "
                                "1 from its last heartbeat details, once a worker polls)",
                            ),
                        }
                    ),
                ),
                Action.CANCEL: ActionCapability(
                    True,
                    "request workflow cancellation: graceful, the workflow code decides; a "
                    "running activity sees it on its next heartbeat and releases resources "
                    "marked on_cancel=release",
                    (f"POST {base}/cancel",),
                ),
                Action.TERMINATE: ActionCapability(
                    True,
                    "terminate the workflow at once: no workflow or activity code runs "
                    "again, held resources may leak",
                    (f"POST {base}/terminate",),
                ),
                Action.DECIDE: ActionCapability(
                    True,
                    f"workflow update '{UPDATE_NAME}' (validated by the workflow; updateId = "
                    "the command's idempotency key, so a resend never applies twice)",
                    (f"POST {base}/update/{UPDATE_NAME}",),
                ),
            },
            notes=(
                "heartbeats are the server's record of pending activities (describe), read "
                f"within a budget of {self.config.rps:g} requests/s",
                f"waiting runs carry the search attribute {SEARCH_ATTRIBUTE} and memo "
                f"'{MEMO_KEY}' (irq's workflow helper sets them)",
                "activities without a heartbeat timeout cannot be paused or cancelled promptly",
            ),
        )

    def focus(self, native_ids: set[str]) -> None:
        self._focus = set(native_ids)
        if self._watch is not None:
            self._watch.watch(self._focus)

    def _mark_dirty(self, wid: str) -> None:
        self._dirty.add(wid)

    @property
    def pending_refresh(self) -> set[str]:
        """Runs to describe first on the next poll (their history moved, or acted upon)."""
        return set(self._dirty)

    @property
    def watched(self) -> set[str]:
        """Runs whose history is being long-polled."""
        return self._watch.watched if self._watch is not None else set()

    # ------------------------------------------------------------------ observe

    async def observe(self) -> Observation:
        now = utcnow()
        # runs whose liveness is in question are described before the listing spends the
        # budget: whatever the poll interval, a silent run turns lost soon after the server
        # times it out
        first = self._choose_in_question(now)
        await self._describe_many(first)
        missing = await self._refresh_listing(now)
        running_ids = set(self._listed)
        self.planner.forget(running_ids)
        for wid in list(self._described):
            if wid not in running_ids:
                del self._described[wid]
        self._loss_unasked &= running_ids

        chosen = self._choose(running_ids - set(first), now)
        await self._describe_many(chosen)

        # runs that left the running list without showing up as closed: deleted or aged out
        gone: list[str] = []
        self._missing.update(missing)
        for wid in sorted(self._missing):
            if wid in self._listed or wid in self._closed:
                self._missing.discard(wid)
                continue
            if not self.bucket.try_take():
                break  # the rest next poll
            self._missing.discard(wid)
            try:
                describe = await self.http.describe_workflow(wid)
            except NotFound:
                gone.append(Run.make_id(BACKEND, self.context, wid))
                self._forget(wid)
                continue
            self._closed[wid] = describe.get("workflowExecutionInfo") or {}
            self._list_times[wid] = now

        await self._refresh_workers(now)
        await self._fill_inbox_by_query()
        if self._watch is not None:
            self._watch.watch(self._focus & running_ids)

        runs: list[Run] = []
        interrupts: list[Interrupt] = []
        for wid, info in self._listed.items():
            run, found = self._build(wid, info, now)
            runs.append(run)
            interrupts.extend(found)
        for wid, info in self._closed.items():
            run, _ = self._build(wid, info, now)
            runs.append(run)
        self._dirty -= set(chosen) | set(first)
        return Observation(runs=runs, interrupts=interrupts, gone=gone, complete=not self.truncated)

    async def _refresh_listing(self, now: datetime) -> list[str]:
        """Bring the running / recently closed listing up to date.

        Every ``relist_s`` a full list of running workflows (heavy on the server for large
        fleets: ~1 s for 1,000 runs on the dev server); in between three cheap queries: runs
        started since the last listing, runs closed since, and runs with pending interrupts
        (irq's search attribute). Returns workflow ids that left the full running list
        without showing up as closed (deleted, or closed before the window).
        """
        mono = time.monotonic()
        window_start = now - timedelta(seconds=self.config.closed_window_s)
        closed_query = "ExecutionStatus != 'Running' AND CloseTime > '{}'"
        missing: list[str] = []
        full = self._full_listed_mono is None or (
            mono - self._full_listed_mono >= self.config.relist_s
        )
        if not full and self._listed_mono is not None and (
            mono - self._listed_mono < self._listing_interval_s()
        ):
            return missing  # listed recently enough for the budget: describes go first
        self._listed_mono = mono
        if full:
            running = await self._list(self._query(RUNNING_QUERY), limit=self.config.max_runs)
            self.truncated = self._last_list_truncated
            closed: list[dict[str, Any]] = []
            if self.config.closed_window_s > 0:
                closed = await self._list(
                    self._query(closed_query.format(window_start.isoformat())), limit=500
                )
            previously = set(self._listed)
            self._listed = {_wid(e): e for e in running}
            self._closed = {_wid(e): e for e in closed if _wid(e) not in self._listed}
            self._list_times = {wid: now for wid in (*self._listed, *self._closed)}
            self._full_listed_mono = mono
            missing = [w for w in previously - set(self._listed) if w not in self._closed]
        else:
            since = (self._listed_at - timedelta(seconds=LIST_SLACK_S)).isoformat()
            started = await self._list(
                self._query(f"{RUNNING_QUERY} AND StartTime > '{since}'"),
                limit=self.config.max_runs,
            )
            closed = await self._list(
                self._query(closed_query.format(since)), limit=self.config.max_runs
            )
            for info in started:
                self._listed[_wid(info)] = info
                self._list_times[_wid(info)] = now
            if self._search_attribute_ok:
                waiting = {
                    _wid(e): e
                    for e in await self._list(
                        pending_interrupts_query(self.config.visibility_filter),
                        limit=self.config.max_runs,
                    )
                }
                for wid, info in list(self._listed.items()):
                    if wid in waiting:
                        self._listed[wid] = waiting[wid]
                        self._list_times[wid] = now
                    elif _pending_ids(info) or memo_field(info, MEMO_KEY) is not None:
                        self._listed[wid] = _without_interrupts(info)
                        self._list_times[wid] = now
            for info in closed:
                wid = _wid(info)
                self._listed.pop(wid, None)
                self._closed[wid] = info
                self._list_times[wid] = now
        for wid, info in list(self._closed.items()):
            closed_at = parse_time(info.get("closeTime"))
            if closed_at is not None and closed_at < window_start:
                del self._closed[wid]
        self._listed_at = now
        return missing

    def _query(self, base: str) -> str:
        extra = self.config.visibility_filter
        return f"{base} AND ({extra})" if extra else base

    async def _list(self, query: str, *, limit: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token: str | None = None
        self._last_list_truncated = False
        while True:
            self.bucket.charge()
            page = await self.http.list_workflows(
                query, page_size=min(self.config.page_size, limit), next_page_token=token
            )
            executions = page.get("executions") or []
            if not isinstance(executions, list):
                raise Unreachable(f"temporal list: 'executions' is not a list at {self.url}")
            out.extend(e for e in executions if isinstance(e, dict) and _wid(e))
            token = page.get("nextPageToken") or None
            if not token:
                return out
            if len(out) >= limit:
                self._last_list_truncated = True
                return out[:limit]

    def _listing_interval_s(self) -> float:
        """Seconds between incremental listings: their calls stay within LISTING_SHARE."""
        calls = 3 if self._search_attribute_ok else 2
        return calls / (self.config.rps * LISTING_SHARE)

    def _choose_in_question(self, now: datetime) -> list[str]:
        """Late runs and runs past their heartbeat deadline, within the budget (a quarter of
        it stays for the others, as in :meth:`RefreshPlanner.pick`)."""
        budget = max(0, int(self.bucket.available))
        if budget >= 4:
            budget -= int(budget * 0.25)
        chosen = self.planner.in_question(self._listed, now=now)[:budget]
        self.bucket.charge(len(chosen))
        return chosen

    def _choose(self, running_ids: set[str], now: datetime) -> list[str]:
        budget = max(0, int(self.bucket.available))
        chosen = self.planner.pick(
            running_ids, focus=self._focus, dirty=self._dirty, now=now, budget=budget
        )
        self.bucket.charge(len(chosen))
        return chosen

    async def _describe_many(self, wids: list[str]) -> None:
        if not wids:
            return
        sem = asyncio.Semaphore(8)

        async def one(wid: str) -> None:
            async with sem:
                try:
                    await self._describe(wid)
                except NotFound:
                    self._listed.pop(wid, None)

        results = await asyncio.gather(*(one(w) for w in wids), return_exceptions=True)
        for result in results:
            if isinstance(result, Unreachable):
                raise result
            if isinstance(result, BaseException) and not isinstance(result, BackendError):
                raise result

    async def _describe(self, wid: str) -> dict[str, Any]:
        describe = await self.http.describe_workflow(wid)
        now = utcnow()
        mono = time.monotonic()
        info = describe.get("workflowExecutionInfo") or {}
        acts = activities_from_describe(describe)
        previous = self._described.get(wid)
        self._described[wid] = _Described(
            info, acts, now, mono, workflow_task_waiting_s(describe, now)
        )
        for act in acts:
            resources = self._resources_of(act)
            if resources:
                self._manifests[wid] = resources
            if act.heartbeat_at is not None:
                self._sample(wid, act)
        await self._check_heartbeat_loss(wid, describe, previous)
        deadline = None
        moving = False
        late = wid in self._loss_unasked
        for act in acts:
            beat = act.heartbeat_at or act.last_started_at
            if beat and act.heartbeat_timeout_s and act.state == "started":
                due = beat + timedelta(seconds=act.heartbeat_timeout_s)
                deadline = due if deadline is None else min(deadline, due)
            state = activity_state(act, now)
            moving = moving or state in _MOVING
            late = late or state is RunState.LATE
        self.planner.mark_described(wid, at=mono, deadline_at=deadline, moving=moving, late=late)
        return describe

    @staticmethod
    def _resources_of(act: ActivityView) -> list[Resource]:
        return resources_from_details(act.details)

    def _sample(self, wid: str, act: ActivityView) -> None:
        samples = self._samples.setdefault(wid, deque(maxlen=32))
        assert act.heartbeat_at is not None
        if samples and samples[-1].at == act.heartbeat_at:
            return
        irq = act.irq_details or {}
        samples.append(
            Heartbeat(
                at=act.heartbeat_at,
                seq=int(irq.get("seq") or len(samples) + 1),
                progress=progress_fraction(irq.get("progress")),
                details=act.details if isinstance(act.details, dict) else {"value": act.details},
                resources=self._resources_of(act) or None,
            )
        )

    async def _check_heartbeat_loss(
        self, wid: str, describe: dict[str, Any], previous: _Described | None
    ) -> None:
        """An activity that timed out with no retry left vanishes from describe: ask history.

        Asked when the workflow has no pending activity and either had one at the previous
        describe or, first seen, has a workflow task waiting (what follows such a timeout, at
        once: a worker that is alive takes it within milliseconds). A run whose activity just
        vanished always gets its history read (charged to the budget, maybe into debt): it is
        what tells ``lost`` from ``running``; a first-seen one waits for a free token and is
        asked at a later describe (its liveness stays in question until then).
        """
        info = describe.get("workflowExecutionInfo") or {}
        if describe.get("pendingActivities") or (
            info.get("status") != "WORKFLOW_EXECUTION_STATUS_RUNNING"
        ):
            self._lost.pop(wid, None)
            self._loss_unasked.discard(wid)
            return
        length = int(info.get("historyLength") or 0)
        known = self._lost.get(wid)
        unasked = wid in self._loss_unasked
        if known is not None and known[0] == length and not unasked:
            return
        had_activity = previous is not None and bool(previous.activities)
        first_and_waiting = previous is None and workflow_task_waiting_s(describe) is not None
        if not (had_activity or unasked or first_and_waiting or (known is not None and known[1])):
            self._lost[wid] = (length, None)
            return
        if had_activity or unasked:
            self.bucket.charge()
        elif not self.bucket.try_take():
            self._loss_unasked.add(wid)
            return
        self._loss_unasked.discard(wid)
        try:
            page = await self.http.history(wid, reverse=True, page_size=8)
        except NotFound:
            return
        events = (page.get("history") or {}).get("events") or []
        self._lost[wid] = (length, heartbeat_loss_from_history(events))

    async def _refresh_workers(self, now: datetime) -> None:
        mono = time.monotonic()
        if self._workers_checked is not None and (
            mono - self._workers_checked < self.config.workers_every_s
        ):
            return
        if not self.bucket.try_take():
            return
        self._workers_checked = mono
        try:
            data = await self.http.workers()
        except Unreachable:
            raise
        except BackendError:  # older servers have no workers route
            self._stale_workers = {}
            return
        self._stale_workers = stale_workers(workers_from_json(data), now)

    async def _fill_inbox_by_query(self) -> None:
        """Runs whose search attribute lists interrupts the memo does not carry: query them."""
        for wid, info in list(self._listed.items()):
            ids = _pending_ids(info)
            memo = memo_field(info, MEMO_KEY)
            if not ids or isinstance(memo, list):
                self._inbox.pop(wid, None)
                continue
            cached = self._inbox.get(wid)
            if cached is not None and cached.ids == tuple(ids):
                continue
            if not self.bucket.try_take():
                return
            try:
                result = await self.http.query_workflow(
                    wid, QUERY_NAME, timeout_s=self.config.query_timeout_s
                )
            except (QueryFailed, NotFound):
                # no worker answered (a query blocks without one): the run still shows as
                # waiting with its interrupt ids; retried when the pending ids change
                self._inbox[wid] = _Inbox(tuple(ids), [])
                continue
            items = decode_payloads(result)
            self._inbox[wid] = _Inbox(tuple(ids), items[0] if items else [])

    # ------------------------------------------------------------------ building runs

    def _build(self, wid: str, info: dict[str, Any], now: datetime) -> tuple[Run, list[Interrupt]]:
        described = self._described.get(wid)
        listed_at = self._list_times.get(wid, self._listed_at)
        if described is not None and described.observed_at >= listed_at:
            info = {**info, **described.info}  # describe is newer than the visibility list
        elif described is not None:
            info = {**described.info, **info}
        running = info.get("status", "WORKFLOW_EXECUTION_STATUS_RUNNING") == (
            "WORKFLOW_EXECUTION_STATUS_RUNNING"
        )
        run_id = Run.make_id(BACKEND, self.context, wid)
        items: Any = memo_field(info, MEMO_KEY)
        if not isinstance(items, list):
            cached = self._inbox.get(wid)
            items = cached.items if cached else []
        interrupts = (
            interrupts_from_shape(
                run_id, items, fallback_created_at=parse_time(info.get("startTime")) or now
            )
            if running
            else []
        )
        ids = [i.native_id for i in interrupts] or (_pending_ids(info) if running else [])
        report = memo_field(info, REPORT_MEMO_KEY)
        lost = self._lost.get(wid)
        evidence = RunEvidence(
            workflow_id=wid,
            info=info,
            activities=described.activities if described and running else None,
            observed_at=described.observed_at if described else None,
            interrupt_ids=ids,
            cancel_requested=wid in self._cancel_requested,
            heartbeat_lost=lost[1] if lost else None,
            report=report if isinstance(report, dict) else None,
            last_manifest=self._manifests.get(wid, []),
            stale_workers=self._stale_workers,
            workflow_task_waiting_s=described.workflow_task_waiting_s if described else None,
        )
        run = run_from_evidence(evidence, context=self.context, now=now)
        if not running:
            self._cancel_requested.discard(wid)
        return run, interrupts

    def _forget(self, wid: str) -> None:
        self._listed.pop(wid, None)
        self._closed.pop(wid, None)
        self._described.pop(wid, None)
        self._manifests.pop(wid, None)
        self._lost.pop(wid, None)
        self._samples.pop(wid, None)
        self._inbox.pop(wid, None)

    # ------------------------------------------------------------------ reads

    async def get_run(self, native_id: str) -> Run:
        describe = await self._describe(native_id)
        info = describe.get("workflowExecutionInfo") or {}
        if info.get("status") != "WORKFLOW_EXECUTION_STATUS_RUNNING":
            self._closed[native_id] = info
            self._listed.pop(native_id, None)
        run, _ = self._build(native_id, info, utcnow())
        return run

    async def list_interrupts(self) -> list[Interrupt]:
        """Every pending interrupt in the namespace: one list query (plus pages).

        Runs whose memo lacks the interrupt details are queried (``irq_pending_interrupts``).
        """
        if not self._search_attribute_ok:
            executions = await self._list(self._query(RUNNING_QUERY), limit=self.config.max_runs)
            executions = [e for e in executions if memo_field(e, MEMO_KEY)]
        else:
            executions = await self._list(
                pending_interrupts_query(self.config.visibility_filter),
                limit=self.config.max_runs,
            )
        now = utcnow()
        out: list[Interrupt] = []
        for info in executions:
            wid = _wid(info)
            run_id = Run.make_id(BACKEND, self.context, wid)
            items = memo_field(info, MEMO_KEY)
            if not isinstance(items, list):
                try:
                    result = await self.http.query_workflow(
                        wid, QUERY_NAME, timeout_s=self.config.query_timeout_s
                    )
                except (QueryFailed, NotFound):
                    continue
                decoded = decode_payloads(result)
                items = decoded[0] if decoded else []
            out.extend(
                interrupts_from_shape(
                    run_id, items, fallback_created_at=parse_time(info.get("startTime")) or now
                )
            )
        return out

    async def pending_interrupts(self, native_id: str) -> list[Interrupt]:
        """The pending interrupts of one run, from the workflow itself (query; needs a worker)."""
        try:
            result = await self.http.query_workflow(
                native_id, QUERY_NAME, timeout_s=self.config.query_timeout_s
            )
        except QueryFailed as exc:
            raise Unsupported(
                f"{native_id}: the workflow did not answer '{QUERY_NAME}' ({exc.message})"
            ) from exc
        decoded = decode_payloads(result)
        return interrupts_from_shape(
            Run.make_id(BACKEND, self.context, native_id),
            decoded[0] if decoded else [],
            fallback_created_at=utcnow(),
        )

    async def journal(self, native_id: str) -> list[JournalStep]:
        events: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(20):  # at most 20 pages of 500 events
            page = await self.http.history(native_id, page_size=500, next_page_token=token)
            events.extend((page.get("history") or {}).get("events") or [])
            token = page.get("nextPageToken") or None
            if not token:
                break
        return journal_from_history(events)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        try:
            await self._describe(native_id)
        except NotFound:
            raise
        return list(self._samples.get(native_id, ()))

    # ------------------------------------------------------------------ actions

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        describe = await self._describe(native_id)
        self._require_running(native_id, describe)
        acts = activities_from_describe(describe)
        targets = [a for a in acts if not a.paused and a.state in ("started", "scheduled")]
        if not targets:
            states = ", ".join(f"{a.activity_id}: {a.state}" for a in acts) or "none"
            raise Conflict(
                f"{native_id}: no activity to pause (pending activities: {states}); Temporal "
                "pauses activities, not the workflow itself",
                target=native_id,
            )
        ops: list[str] = []
        body = {"identity": identity, "reason": reason}
        for act in targets:
            await self.http.activity_command(native_id, act.activity_id, "pause", body)
            ops.append(f"pause activity {act.activity_id} ({act.activity_type})")
        self._dirty.add(native_id)
        slow = [a.activity_id for a in targets if a.heartbeat_timeout_s is None]
        detail = f"pause requested for {len(targets)} activit{'y' if len(targets) == 1 else 'ies'}"
        if slow:
            detail += "; no heartbeat timeout on " + ", ".join(slow) + ": effective on completion"
        else:
            detail += "; the agent stops at its next heartbeat"
        return ActionOutcome(detail=detail, operations=ops)

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        describe = await self._describe(native_id)
        self._require_running(native_id, describe)
        acts = activities_from_describe(describe)
        paused = [a for a in acts if a.paused or a.state in ("paused", "pause_requested")]
        if paused:
            return await self._unpause(native_id, paused, reason=reason, identity=identity)
        if lost:
            return await self._retry_lost(native_id, describe, acts, identity=identity)
        raise Conflict(f"{native_id}: no paused activity to resume", target=native_id)

    async def _unpause(
        self, native_id: str, targets: list[ActivityView], *, reason: str, identity: str
    ) -> ActionOutcome:
        ops: list[str] = []
        body = {"identity": identity, "reason": reason, "jitter": "0s"}
        for act in targets:
            await self.http.activity_command(native_id, act.activity_id, "unpause", body)
            ops.append(f"unpause activity {act.activity_id} ({act.activity_type})")
        self._dirty.add(native_id)
        return ActionOutcome(
            detail=f"resumed {len(targets)} activit{'y' if len(targets) == 1 else 'ies'}: the "
            "next attempt continues from the last heartbeat details",
            operations=ops,
        )

    async def _retry_lost(
        self,
        native_id: str,
        describe: dict[str, Any],
        acts: list[ActivityView],
        *,
        identity: str,
    ) -> ActionOutcome:
        """Resume of a run whose agent went silent: what Temporal can do about it.

        Temporal retries an activity by itself once its heartbeat timeout fires; the attempt
        starts when a worker polls the task queue. An activity waiting for that retry is
        reset ("retry now": no backoff wait, attempt counter back to 1, heartbeat details
        kept, so the agent continues from its last heartbeat). An attempt the server still
        counts as running cannot be hurried: a reset of it takes effect only at its heartbeat
        timeout (measured on the 1.32 dev server), so it is left to that timeout.
        """
        queue = _task_queue(describe)
        waiting = [a for a in acts if a.state == "scheduled"]
        running = [a for a in acts if a.state == "started"]
        if not waiting and not running:
            raise Conflict(
                f"{native_id}: no activity to retry: the last one timed out with no retry "
                "left, so the workflow code handles that failure when a worker polls task "
                f"queue '{queue}' (to run it again, reset the workflow to an earlier event)",
                target=native_id,
            )
        ops: list[str] = []
        said: list[str] = []
        body = {"identity": identity, "jitter": "0s", "resetHeartbeat": False, "keepPaused": False}
        for act in waiting:
            await self.http.activity_command(native_id, act.activity_id, "reset", body)
            ops.append(f"reset activity {act.activity_id} ({act.activity_type})")
            said.append(
                f"activity {act.activity_id} reset: retried now as attempt 1 (was attempt "
                f"{act.attempt}), continuing from its last heartbeat details"
            )
        now = utcnow()
        for act in running:
            due = ""
            if act.heartbeat_at is not None and act.heartbeat_timeout_s:
                left = act.heartbeat_timeout_s - (now - act.heartbeat_at).total_seconds()
                due = f" (in {max(0.0, left):.0f}s)" if left > 0 else " (due now)"
            said.append(
                f"activity {act.activity_id} is retried by the server at its heartbeat "
                f"timeout{due}: nothing to force before then"
            )
        self._dirty.add(native_id)
        return ActionOutcome(
            detail="; ".join(said) + f"; the attempt starts when a worker polls task queue "
            f"'{queue}'",
            operations=ops,
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        await self.http.cancel_workflow(
            native_id, reason=reason, identity=identity, request_id=str(uuid.uuid4())
        )
        self._cancel_requested.add(native_id)
        self._dirty.add(native_id)
        return ActionOutcome(
            detail="cancellation requested: the workflow code cleans up; running activities "
            "see it on their next heartbeat",
            operations=["request workflow cancellation"],
        )

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        await self.http.terminate_workflow(native_id, reason=reason, identity=identity)
        self._dirty.add(native_id)
        return ActionOutcome(
            detail="terminated: no cleanup ran; resources the agent held may leak",
            operations=["terminate workflow"],
        )

    def _require_running(self, native_id: str, describe: dict[str, Any]) -> None:
        status = (describe.get("workflowExecutionInfo") or {}).get("status", "")
        if status != "WORKFLOW_EXECUTION_STATUS_RUNNING":
            raise Conflict(
                f"{native_id} is {status.removeprefix('WORKFLOW_EXECUTION_STATUS_').lower()}",
                target=native_id,
            )

    # ------------------------------------------------------------------ decisions

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        _, _, native_id = split_run_id(interrupt.run_id)
        check_decision(interrupt, decision)
        args = [
            update_input(
                interrupt.native_id,
                decision.payload(),
                by=identity,
                idempotency_key=idempotency_key,
            )
        ]
        deadline = time.monotonic() + self.config.decide_wait_s
        while True:
            try:
                answer = await self.http.update_workflow(
                    native_id, UPDATE_NAME, update_id=idempotency_key, args=args, identity=identity
                )
            except Conflict as exc:  # workflow already closed
                raise Conflict(
                    f"{interrupt.id}: the run is closed; the interrupt is no longer pending "
                    f"({exc.message})",
                    target=interrupt.id,
                ) from exc
            outcome = answer.get("outcome")
            if isinstance(outcome, dict):
                break
            if time.monotonic() >= deadline:
                raise Unreachable(
                    f"{interrupt.id}: no worker accepted the decision within "
                    f"{self.config.decide_wait_s:g}s (update admitted, not delivered); resend "
                    "with the same idempotency key",
                    target=interrupt.id,
                )
        self._dirty.add(native_id)
        if "failure" in outcome:
            failure = outcome["failure"] or {}
            ftype = str((failure.get("applicationFailureInfo") or {}).get("type") or "")
            message = str(failure.get("message") or "decision rejected by the workflow")
            if ftype == ERROR_NOT_PENDING:
                raise Conflict(f"{interrupt.id}: {message}", target=interrupt.id)
            if ftype == ERROR_INVALID_DECISION:
                raise InvalidInput(f"{interrupt.id}: {message}", target=interrupt.id)
            if "not found" in message and UPDATE_NAME in message:
                raise Unsupported(
                    f"{interrupt.id}: the workflow has no '{UPDATE_NAME}' update handler "
                    f"({message})",
                    target=interrupt.id,
                )
            raise InvalidInput(f"{interrupt.id}: rejected by the workflow: {message}")
        result = decode_payloads(outcome.get("success"))
        applied = result[0] if result else {}
        detail = (
            f"{decision.kind.value} delivered to {interrupt.native_id} (update {idempotency_key})"
        )
        if isinstance(applied, dict) and applied.get("applied_at"):
            detail += f", applied at {applied['applied_at']}"
        return ActionOutcome(
            detail=detail, operations=[f"update {UPDATE_NAME} updateId={idempotency_key}"]
        )

    # ------------------------------------------------------------------ measurement

    def staleness_s(self) -> list[float]:
        """Seconds since each running workflow's pending activities were last described."""
        return self.planner.staleness(self._listed, time.monotonic())


# ============================================================================ helpers


def _wid(info: dict[str, Any]) -> str:
    return str((info.get("execution") or {}).get("workflowId") or "")


def workflow_task_waiting_s(describe: dict[str, Any], now: datetime | None = None) -> float | None:
    """Seconds the workflow's pending workflow task has waited for a worker (None: none)."""
    task = describe.get("pendingWorkflowTask")
    if not isinstance(task, dict):
        return None
    scheduled = parse_time(task.get("scheduledTime") or task.get("originalScheduledTime"))
    if scheduled is None:
        return None
    return max(0.0, ((now or utcnow()) - scheduled).total_seconds())


def _without_interrupts(info: dict[str, Any]) -> dict[str, Any]:
    """A listing entry whose interrupts were decided since (no longer in the waiting query)."""
    out = dict(info)
    attrs = dict((info.get("searchAttributes") or {}).get("indexedFields") or {})
    attrs.pop(SEARCH_ATTRIBUTE, None)
    out["searchAttributes"] = {"indexedFields": attrs}
    memo = dict((info.get("memo") or {}).get("fields") or {})
    memo.pop(MEMO_KEY, None)
    out["memo"] = {"fields": memo}
    return out


def _task_queue(describe: dict[str, Any]) -> str:
    info = describe.get("workflowExecutionInfo") or {}
    queue = info.get("taskQueue")
    return str(queue.get("name", "") if isinstance(queue, dict) else queue or "")


def _pending_ids(info: dict[str, Any]) -> list[str]:
    value = search_attribute(info, SEARCH_ATTRIBUTE)
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value:
        return [value]
    return []


def check_decision(interrupt: Interrupt, decision: Decision) -> None:
    """Refuse before sending what the workflow's validator would refuse: the one decision
    check (console/decision_check.py), raised as InvalidInput."""
    problem = decision_problem(
        decision.kind,
        interrupt.allowed_decisions,
        args=decision.args,
        schema=interrupt.args_schema,
    )
    if problem is not None:
        raise InvalidInput(f"{interrupt.id}: decision refused: {problem}", target=interrupt.id)


def journal_from_history(events: list[dict[str, Any]]) -> list[JournalStep]:
    """Activities (and decisions) as journal steps, in schedule order."""
    steps: dict[str, JournalStep] = {}
    order: list[str] = []
    for event in sorted(events, key=lambda e: int(e.get("eventId") or 0)):
        etype = str(event.get("eventType", "")).removeprefix("EVENT_TYPE_")
        at = parse_time(event.get("eventTime"))
        if etype == "ACTIVITY_TASK_SCHEDULED":
            attrs = event.get("activityTaskScheduledEventAttributes") or {}
            key = str(event.get("eventId"))
            name = (attrs.get("activityType") or {}).get("name", "activity")
            steps[key] = JournalStep(
                index=len(order),
                name=f"{name} (activity {attrs.get('activityId', '?')})",
                status="in_flight",
                started_at=at,
            )
            order.append(key)
            continue
        if etype.startswith("ACTIVITY_TASK_") and etype != "ACTIVITY_TASK_STARTED":
            attr_name = _camel(etype) + "EventAttributes"
            attrs = event.get(attr_name) or {}
            key = str(attrs.get("scheduledEventId") or "")
            step = steps.get(key)
            if step is None or etype == "ACTIVITY_TASK_CANCEL_REQUESTED":
                continue
            step.completed_at = at
            step.status = "completed" if etype == "ACTIVITY_TASK_COMPLETED" else "failed"
            step.detail = etype.removeprefix("ACTIVITY_TASK_").lower()
            failure = attrs.get("failure") or {}
            ftype = (failure.get("applicationFailureInfo") or {}).get("type")
            if ftype == ERROR_ACTIVITY_CANCELLED:
                step.detail = "cancelled on request (agent released its resources)"
            elif failure.get("message"):
                step.detail += f": {failure['message']}"
            continue
        if etype == "WORKFLOW_EXECUTION_UPDATE_COMPLETED":
            attrs = event.get("workflowExecutionUpdateCompletedEventAttributes") or {}
            meta = attrs.get("meta") or {}
            outcome = attrs.get("outcome") or {}
            key = f"update:{meta.get('updateId', event.get('eventId'))}"
            steps[key] = JournalStep(
                index=len(order),
                name=f"decision (update {meta.get('updateId', '?')})",
                status="failed" if "failure" in outcome else "completed",
                started_at=at,
                completed_at=at,
            )
            order.append(key)
    return [steps[k] for k in order]


def _camel(upper_snake: str) -> str:
    head, *rest = upper_snake.lower().split("_")
    return head + "".join(p.capitalize() for p in rest)


def from_url(parsed: BackendURL, ledger: PauseLedger) -> TemporalBackend:
    """Registry entry point: ``temporal+http://HOST:HTTP_PORT/NAMESPACE?rps=20``."""
    return TemporalBackend(TemporalConfig.from_url(parsed), ledger)


#: the type checker holds ``from_url`` (and so TemporalBackend) to the adapter contract
FACTORY: BackendFactory = from_url
