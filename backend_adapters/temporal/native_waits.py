"""Finding native human waits (issue 22) within the request budget.

What a wait looks like is in ``native_wait_shapes.py``; this module decides what to ask and
when, so detection never costs one call per workflow per poll:

- the handler definitions (``__temporal_workflow_metadata``, a query: it needs a worker) are
  asked once per **workflow type** and kept for ``METADATA_TTL_S`` (a deploy that adds a
  handler is seen within that); a poll waits at most ``METADATA_WAIT_S`` for the answer, then
  goes on (the answer lands for the next poll), and a type whose query failed is asked again
  after ``METADATA_RETRY_S``;
- whether a workflow is blocked comes from the describes the observer makes anyway (nothing
  pending); its wait site is read from one page of reverse history only when its **history
  length** changed since the last read;
- a workflow whose type answers signals or updates but still has work pending is about to
  wait: the refresh planner describes it again with the moving runs, so the wait is seen
  within a poll or two of its start.

Workflows that use irq's helper (an ``irq_decide`` update) are left to
``interrupt_discovery.py``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from backend_adapters.base import BackendError, NotFound, Unreachable
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.conventions import SCHEMAS_MEMO_KEY
from backend_adapters.temporal.native_wait_shapes import (
    METADATA_QUERY,
    HandlerDef,
    WaitSite,
    handler_schemas,
    handlers_from_metadata,
    wait_interrupt,
    wait_site_from_history,
)
from backend_adapters.temporal.observed_workflows import ObservedWorkflows
from backend_adapters.temporal.payloads import memo_field
from backend_adapters.temporal.request_budget import RefreshPlanner, TokenBucket
from backend_adapters.temporal.state_mapping import BACKEND
from console.model import Interrupt, Run, utcnow

#: how long a workflow type's handler definitions are trusted before they are asked again
METADATA_TTL_S = 300.0
#: after a failed metadata query (no worker answered), ask that type again this much later
METADATA_RETRY_S = 30.0
#: the most a poll waits for the metadata queries it started
METADATA_WAIT_S = 0.25
#: reverse history page read for a wait site (the wait's own events are the newest few)
HISTORY_PAGE = 20
_RUNNING = "WORKFLOW_EXECUTION_STATUS_RUNNING"


@dataclass
class NativeWaitStats:
    """Calls native wait discovery made (the benchmark reports them)."""

    metadata_queries: int = 0
    history_reads: int = 0


@dataclass
class _TypeHandlers:
    handlers: tuple[HandlerDef, ...] | None  # None: irq's helper answers this type
    fetched_mono: float


class NativeWaits:
    """The native waits of one namespace's running workflows."""

    def __init__(
        self,
        connection: TemporalConnection,
        config: TemporalConfig,
        bucket: TokenBucket,
        planner: RefreshPlanner,
        observed: ObservedWorkflows,
    ) -> None:
        self._connection = connection
        self._config = config
        self._bucket = bucket
        self._planner = planner
        self._observed = observed
        self._types: dict[str, _TypeHandlers] = {}
        self._retry_at: dict[str, float] = {}
        self._asking: dict[str, asyncio.Task[None]] = {}
        #: workflow id -> (history length read, the wait found then; None: not waiting)
        self._sites: dict[str, tuple[int, WaitSite | None]] = {}
        self.stats = NativeWaitStats()

    # ------------------------------------------------------------------ the poll

    async def refresh(self) -> None:
        """After the poll's describes: learn unknown types, read the sites that moved."""
        observed = self._observed
        running = [
            (wid, d)
            for wid, d in observed.described.items()
            if wid in observed.listed and d.info.get("status", _RUNNING) == _RUNNING
        ]
        await self._learn_types({type_name(d.info): wid for wid, d in running})
        reads: list[tuple[str, int]] = []
        for wid, described in running:
            if not self.handlers_of(type_name(described.info)):
                self._sites.pop(wid, None)
            elif not described.idle:
                self._sites.pop(wid, None)
                self._planner.look_again(wid)  # about to wait: look again next poll
            else:
                length = history_length(described.info)
                cached = self._sites.get(wid)
                if cached is None or cached[0] < length:
                    reads.append((wid, length))
        for wid in list(self._sites):
            if wid not in observed.listed:
                del self._sites[wid]
        await self._read_sites(reads)

    def handlers_of(self, workflow_type: str) -> tuple[HandlerDef, ...]:
        """The signal / update handlers of a type ('' for none, unknown, or irq's helper)."""
        known = self._types.get(workflow_type)
        return known.handlers or () if known is not None else ()

    async def _learn_types(self, example_of: dict[str, str]) -> None:
        mono = time.monotonic()
        started: list[asyncio.Task[None]] = []
        for wtype, wid in example_of.items():
            known = self._types.get(wtype)
            fresh = known is not None and mono - known.fetched_mono < METADATA_TTL_S
            if fresh or wtype in self._asking or self._retry_at.get(wtype, 0.0) > mono:
                continue
            if not self._bucket.try_take():
                break
            task = asyncio.create_task(self._ask_metadata(wtype, wid), name=f"irq-meta-{wtype}")
            self._asking[wtype] = task
            started.append(task)
        if started:
            await asyncio.wait(started, timeout=METADATA_WAIT_S)

    async def _ask_metadata(self, wtype: str, wid: str) -> None:
        self.stats.metadata_queries += 1
        try:
            result = await self._connection.http.query_workflow(
                wid, METADATA_QUERY, timeout_s=self._config.query_timeout_s
            )
        except BackendError:  # no worker answered, or the server is away: ask again later
            self._retry_at[wtype] = time.monotonic() + METADATA_RETRY_S
        else:
            self._types[wtype] = _TypeHandlers(handlers_from_metadata(result), time.monotonic())
            self._retry_at.pop(wtype, None)
        finally:
            self._asking.pop(wtype, None)

    async def _read_sites(self, reads: list[tuple[str, int]]) -> None:
        sem = asyncio.Semaphore(8)
        chosen = []
        for wid, length in reads:
            if not self._bucket.try_take():
                break  # the rest next poll
            chosen.append((wid, length))

        async def one(wid: str, length: int) -> None:
            async with sem:
                site = await self.read_site(wid, length)
                self._sites[wid] = (site.history_length if site else length, site)

        results = await asyncio.gather(*(one(w, n) for w, n in chosen), return_exceptions=True)
        for result in results:
            if isinstance(result, Unreachable):
                raise result
            if isinstance(result, BaseException) and not isinstance(result, BackendError):
                raise result

    async def read_site(self, wid: str, length: int) -> WaitSite | None:
        """The wait ``wid`` is blocked in now, from the newest page of its history."""
        self.stats.history_reads += 1
        try:
            page = await self._connection.http.history(wid, reverse=True, page_size=HISTORY_PAGE)
        except NotFound:
            return None
        events = (page.get("history") or {}).get("events") or []
        newest = max((int(e.get("eventId") or 0) for e in events), default=length)
        return wait_site_from_history(events, max(newest, length))

    # ------------------------------------------------------------------ reads

    def interrupt_of(self, wid: str, info: dict[str, Any]) -> Interrupt | None:
        """The inbox item of ``wid``'s native wait, if it waits (as of the last poll)."""
        cached = self._sites.get(wid)
        if cached is None or cached[1] is None:
            return None
        site = cached[1]
        if history_length(info) > site.history_length:
            return None  # it moved on since the site was read; read again next poll
        wtype = type_name(info)
        handlers = self.handlers_of(wtype)
        if not handlers:
            return None
        return wait_interrupt(
            Run.make_id(BACKEND, self._config.context, wid),
            wtype,
            site,
            handlers,
            handler_schemas(memo_field(info, SCHEMAS_MEMO_KEY)),
            fallback_created_at=utcnow(),
        )

    def known_interrupts(self) -> list[Interrupt]:
        """Every native wait seen by the last poll."""
        out: list[Interrupt] = []
        for wid in self._sites:
            described = self._observed.described.get(wid)
            info = {**self._observed.listed.get(wid, {}), **(described.info if described else {})}
            found = self.interrupt_of(wid, info)
            if found is not None:
                out.append(found)
        return out

    async def current_site(self, wid: str, describe: dict[str, Any]) -> WaitSite | None:
        """The wait ``wid`` is in right now (``describe`` just read), for a decision or an
        action: None when it is not blocked or its type answers no signal or update."""
        info = describe.get("workflowExecutionInfo") or {}
        if info.get("status") != _RUNNING:
            return None
        wtype = type_name(info)
        if wtype not in self._types:  # not polled yet (a fresh adapter re-driving a decision)
            asking = self._asking.get(wtype)
            if asking is not None:
                await asyncio.wait([asking])
            else:
                await self._ask_metadata(wtype, wid)
        if not self.handlers_of(wtype):
            return None
        pending = ("pendingActivities", "pendingChildren", "pendingNexusOperations")
        if any(describe.get(k) for k in pending) or describe.get("pendingWorkflowTask"):
            return None
        return await self.read_site(wid, history_length(info))

    def forget(self, wid: str) -> None:
        self._sites.pop(wid, None)

    async def close(self) -> None:
        tasks = list(self._asking.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._asking.clear()


def type_name(info: dict[str, Any]) -> str:
    return str((info.get("type") or {}).get("name") or "")


def history_length(info: dict[str, Any]) -> int:
    try:
        return int(info.get("historyLength") or 0)
    except (TypeError, ValueError):
        return 0
