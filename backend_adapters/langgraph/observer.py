"""Observing a LangGraph Agent Server: one poll (``observe``), one thread, its journal."""

from __future__ import annotations

import asyncio
from typing import Any

from backend_adapters.base import Observation, PauseLedger
from backend_adapters.langgraph.breakpoints import BreakpointReads
from backend_adapters.langgraph.conventions import BACKEND
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.retry import checkpoint_of, failure_of
from backend_adapters.langgraph.state_mapping import (
    decisions_from_runs,
    interrupts_of,
    journal_from_history,
    may_be_at_breakpoint,
    metadata_of,
    parse_time,
    pending_interrupts,
    run_from_thread,
)
from backend_adapters.langgraph.thread_reads import ThreadReads
from console.model import Interrupt, JournalStep, Run
from console.run_facts import RunError

#: second reads (stopped, failed, at a breakpoint) one poll sends at a time
READS_IN_FLIGHT = 8

#: what a thread needed beyond its first read: its latest run and its failure (failed
#: threads), and its static breakpoint item (threads stopped without an interrupt value)
_Extras = tuple[dict[str, Any] | None, Interrupt | None, RunError | None]


class LangGraphObserver:
    """Polls one Agent Server's threads and builds irq runs and interrupts from them."""

    def __init__(
        self,
        http: AgentServerHttp,
        threads: ThreadReads,
        breakpoints: BreakpointReads,
        ledger: PauseLedger,
        *,
        context: str,
        page_size: int,
        finished_limit: int,
        checkpointer: str | None,
    ) -> None:
        self._http = http
        self._threads = threads
        self._breakpoints = breakpoints
        self._ledger = ledger
        self._context = context
        self._page_size = page_size
        self._finished_limit = finished_limit
        self._checkpointer = checkpointer
        self._checkpointer_known = checkpointer is not None
        # per thread: (updated_at, the thread read in full, what else it needed), so threads
        # that need a second read (stopped, at a breakpoint, failed) are read once per change
        self._full: dict[str, tuple[str, dict[str, Any], _Extras]] = {}

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self._context, native_id)

    async def detect_checkpointer(self) -> None:
        """The in-memory runtime (``langgraph dev``) reports no database pools in its JSON
        metrics; a deployment on PostgreSQL does. ``checkpointer=`` in the URL overrides."""
        if self._checkpointer_known:
            return
        metrics = await self._http.metrics()
        self._checkpointer = (
            "postgres" if ("postgres" in metrics or "redis" in metrics) else ("memory")
        )
        self._checkpointer_known = True

    async def _search_all(self, status: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = await self._http.search_threads(
                status=status, limit=self._page_size, offset=offset
            )
            out.extend(page)
            if len(page) < self._page_size:
                return out
            offset += len(page)

    async def _full_thread(self, thread: dict[str, Any]) -> tuple[dict[str, Any], _Extras]:
        """The thread with its ``error`` (search cannot select it) and its extras; cached per
        update."""
        tid = str(thread["thread_id"])
        stamp = str(thread.get("updated_at") or "")
        cached = self._full.get(tid)
        if cached is not None and cached[0] == stamp:
            return cached[1], cached[2]
        full = await self._http.thread(tid)
        extras = await self._extras(full)
        self._full[tid] = (stamp, full, extras)
        if len(self._full) > 10_000:
            self._full.pop(next(iter(self._full)))
        return full, extras

    async def _extras(self, full: dict[str, Any]) -> _Extras:
        """For a failed thread its latest run (a poisoned resume carries irq's metadata) and
        the node that raised (its state's failed task: the thread's own error hides the
        message); for one stopped without an interrupt value, its static breakpoint if it is
        at one."""
        tid = str(full["thread_id"])
        if full.get("status") == "error":
            runs, state = await asyncio.gather(
                self._http.runs(tid, limit=1), self._http.state(tid)
            )
            at = parse_time(full.get("state_updated_at") or full.get("updated_at"))
            error = failure_of([checkpoint_of(state)], full.get("error"), at)
            return (runs[0] if runs else None), None, error
        if may_be_at_breakpoint(full):
            return None, await self._breakpoints.interrupt(full, run_id=self.run_id(tid)), None
        return None, None, None

    async def _to_run(
        self, thread: dict[str, Any], *, full: bool = False
    ) -> tuple[Run, list[Interrupt]]:
        tid = str(thread["thread_id"])
        run_id = self.run_id(tid)
        last_run, stop, error = None, None, None
        needs_more = thread.get("status") == "error" or (
            thread.get("status") == "interrupted" and not pending_interrupts(thread)
        )
        if needs_more and not full:
            thread, (last_run, stop, error) = await self._full_thread(thread)
        elif needs_more:
            last_run, stop, error = await self._extras(thread)
        interrupts = interrupts_of(thread, run_id=run_id) + ([stop] if stop else [])
        run = run_from_thread(
            thread,
            context=self._context,
            ledger_paused=self._ledger.is_paused(run_id),
            checkpointer=self._checkpointer,
            interrupts=interrupts,
            last_run=last_run,
            failure=error,
        )
        return run, interrupts

    async def observe(self) -> Observation:
        """Every interrupted and busy thread (all pages), plus the latest idle and failed
        threads (``finished_limit`` each). Threads never run (no graph) are skipped."""
        if not self._checkpointer_known:
            await self.detect_checkpointer()
        interrupted, busy, idle, failed = await asyncio.gather(
            self._search_all("interrupted"),
            self._search_all("busy"),
            self._http.search_threads(status="idle", limit=self._finished_limit),
            self._http.search_threads(status="error", limit=self._finished_limit),
        )
        observation = Observation()
        seen: set[str] = set()
        selected = []
        for thread in [*interrupted, *busy, *failed, *idle]:
            tid = str(thread.get("thread_id") or "")
            if not tid or tid in seen or not metadata_of(thread).get("graph_id"):
                continue
            seen.add(tid)
            selected.append(thread)
        # a burst of new stops (each breakpoint needs its state and last run read once) is
        # read a few at a time, not one after another; cached threads cost nothing here
        gate = asyncio.Semaphore(READS_IN_FLIGHT)

        async def one(thread: dict[str, Any]) -> tuple[Run, list[Interrupt]]:
            async with gate:
                return await self._to_run(thread)

        for run, interrupts in await asyncio.gather(*(one(t) for t in selected)):
            observation.runs.append(run)
            observation.interrupts.extend(interrupts)
        return observation

    async def get_run(self, native_id: str) -> Run:
        thread = await self._threads.thread(native_id)
        run = (await self._to_run(thread, full=True))[0]
        if thread.get("status") == "busy":
            # a busy thread's state_updated_at stays at the run's start; its newest
            # checkpoint says when the last node finished (one read, for this run only)
            state = await self._http.state(native_id)
            run.last_step_at = parse_time(state.get("created_at")) or run.last_step_at
        return run

    async def journal(self, native_id: str) -> list[JournalStep]:
        thread = await self._threads.thread(native_id)
        history, runs = await asyncio.gather(
            self._http.history(native_id, limit=200), self._http.runs(native_id, limit=100)
        )
        return journal_from_history(history, thread=thread, decided=decisions_from_runs(runs))
