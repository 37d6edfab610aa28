"""Finding the pending interrupts of Temporal workflows.

Today: the interrupts irq's workflow helper (``agent.py``) raises. It lists their ids in the
search attribute ``SEARCH_ATTRIBUTE`` and their details in the memo ``MEMO_KEY``; a run whose
memo lacks them is asked with the query ``QUERY_NAME`` (which needs a worker). This module is
where every way of finding a workflow waiting for a person lives, so native waits (a workflow
blocked in ``wait_condition`` until a signal or an update, issue 22) are discovered here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backend_adapters.base import BackendError, NotFound, Unsupported
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.conventions import (
    MEMO_KEY,
    QUERY_NAME,
    SEARCH_ATTRIBUTE,
    pending_interrupts_query,
)
from backend_adapters.temporal.http_api import QueryFailed
from backend_adapters.temporal.observed_workflows import ObservedWorkflows, workflow_id
from backend_adapters.temporal.payloads import (
    decode_payloads,
    memo_field,
    parse_time,
    search_attribute,
)
from backend_adapters.temporal.request_budget import TokenBucket
from backend_adapters.temporal.state_mapping import BACKEND, interrupts_from_shape
from backend_adapters.temporal.visibility import RUNNING_QUERY, Visibility
from console.model import Interrupt, Run, utcnow


@dataclass
class _Inbox:
    """Interrupts found by query for runs whose memo lacks them (cache per pending-id set)."""

    ids: tuple[str, ...]
    items: list[Any] = field(default_factory=list)


class InterruptDiscovery:
    """The pending interrupts of one namespace's workflows, from visibility and queries."""

    def __init__(
        self,
        connection: TemporalConnection,
        config: TemporalConfig,
        bucket: TokenBucket,
        visibility: Visibility,
        observed: ObservedWorkflows,
    ) -> None:
        self._connection = connection
        self._config = config
        self._bucket = bucket
        self._visibility = visibility
        self._observed = observed
        self._inbox: dict[str, _Inbox] = {}
        #: the namespace has irq's search attribute (else: memo only, from full listings)
        self.search_attribute_ok = True

    async def detect_search_attribute(self) -> None:
        """Whether the namespace has irq's search attribute (asked once, at start)."""
        try:
            attrs = await self._connection.http.search_attributes()
        except BackendError:
            attrs = {}
        custom = attrs.get("customAttributes") or {}
        self.search_attribute_ok = SEARCH_ATTRIBUTE in custom

    async def refresh_waiting(self, now: datetime) -> None:
        """Between full listings: bring the listed runs' pending interrupts up to date from
        the list of runs carrying the search attribute (one visibility query)."""
        if not self.search_attribute_ok:
            return
        observed = self._observed
        waiting = {
            workflow_id(e): e
            for e in await self._visibility.list(
                pending_interrupts_query(self._config.visibility_filter),
                limit=self._config.max_runs,
            )
        }
        for wid, info in list(observed.listed.items()):
            if wid in waiting:
                observed.listed[wid] = waiting[wid]
                observed.list_times[wid] = now
            elif pending_ids(info) or memo_field(info, MEMO_KEY) is not None:
                observed.listed[wid] = without_interrupts(info)
                observed.list_times[wid] = now

    async def fill_inbox_by_query(self) -> None:
        """Runs whose search attribute lists interrupts the memo does not carry: query them."""
        for wid, info in list(self._observed.listed.items()):
            ids = pending_ids(info)
            memo = memo_field(info, MEMO_KEY)
            if not ids or isinstance(memo, list):
                self._inbox.pop(wid, None)
                continue
            cached = self._inbox.get(wid)
            if cached is not None and cached.ids == tuple(ids):
                continue
            if not self._bucket.try_take():
                return
            try:
                result = await self._connection.http.query_workflow(
                    wid, QUERY_NAME, timeout_s=self._config.query_timeout_s
                )
            except (QueryFailed, NotFound):
                # no worker answered (a query blocks without one): the run still shows as
                # waiting with its interrupt ids; retried when the pending ids change
                self._inbox[wid] = _Inbox(tuple(ids), [])
                continue
            items = decode_payloads(result)
            self._inbox[wid] = _Inbox(tuple(ids), items[0] if items else [])

    def interrupts_of(
        self, wid: str, info: dict[str, Any], *, running: bool, now: datetime
    ) -> tuple[list[Interrupt], list[str]]:
        """The pending interrupts of a listed or described workflow, and their ids (the ids
        alone when only the search attribute names them)."""
        run_id = Run.make_id(BACKEND, self._config.context, wid)
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
        ids = [i.native_id for i in interrupts] or (pending_ids(info) if running else [])
        return interrupts, ids

    def forget(self, wid: str) -> None:
        self._inbox.pop(wid, None)

    async def list_interrupts(self) -> list[Interrupt]:
        """Every pending interrupt in the namespace: one list query (plus pages).

        Runs whose memo lacks the interrupt details are queried (``irq_pending_interrupts``).
        """
        visibility, config = self._visibility, self._config
        if not self.search_attribute_ok:
            executions = await visibility.list(
                visibility.query(RUNNING_QUERY), limit=config.max_runs
            )
            executions = [e for e in executions if memo_field(e, MEMO_KEY)]
        else:
            executions = await visibility.list(
                pending_interrupts_query(config.visibility_filter),
                limit=config.max_runs,
            )
        now = utcnow()
        out: list[Interrupt] = []
        for info in executions:
            wid = workflow_id(info)
            run_id = Run.make_id(BACKEND, config.context, wid)
            items = memo_field(info, MEMO_KEY)
            if not isinstance(items, list):
                try:
                    result = await self._connection.http.query_workflow(
                        wid, QUERY_NAME, timeout_s=config.query_timeout_s
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
            result = await self._connection.http.query_workflow(
                native_id, QUERY_NAME, timeout_s=self._config.query_timeout_s
            )
        except QueryFailed as exc:
            raise Unsupported(
                f"{native_id}: the workflow did not answer '{QUERY_NAME}' ({exc.message})"
            ) from exc
        decoded = decode_payloads(result)
        return interrupts_from_shape(
            Run.make_id(BACKEND, self._config.context, native_id),
            decoded[0] if decoded else [],
            fallback_created_at=utcnow(),
        )


def pending_ids(info: dict[str, Any]) -> list[str]:
    """The interrupt ids irq's search attribute lists on a listing entry."""
    value = search_attribute(info, SEARCH_ATTRIBUTE)
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value:
        return [value]
    return []


def without_interrupts(info: dict[str, Any]) -> dict[str, Any]:
    """A listing entry whose interrupts were decided since (no longer in the waiting query)."""
    out = dict(info)
    attrs = dict((info.get("searchAttributes") or {}).get("indexedFields") or {})
    attrs.pop(SEARCH_ATTRIBUTE, None)
    out["searchAttributes"] = {"indexedFields": attrs}
    memo = dict((info.get("memo") or {}).get("fields") or {})
    memo.pop(MEMO_KEY, None)
    out["memo"] = {"fields": memo}
    return out
