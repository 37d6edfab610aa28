"""Keeps the TUI's list of durable bulk jobs current by asking the gateway's ``jobs`` query.

Why a poll and not the event stream: the gateway publishes no event per job target (that
would be a frame per target to every client); a job's progress lives in the journal and the
``jobs`` query reads it. Polled every :data:`BUSY_S` while a job runs (the operator watches
it move), every :data:`IDLE_S` otherwise, and at once when the audit shows a job created or
cancelled (:meth:`JobWatch.poke`), so a job started from another shell shows up at once.
A job that stops running is reported once through ``finished`` (the gateway's own "job
done" notice goes to ``irq watch``; the TUI says it here).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.client import GatewayError
from console.tui.job_board import JobProgress, parse_jobs

if TYPE_CHECKING:
    from console.tui.fleet_source import FleetSource

BUSY_S = 1.0
IDLE_S = 15.0
#: audit actions after which the list has changed for certain
JOB_ACTIONS = frozenset({"job_create", "job_cancel"})


class JobWatch:
    def __init__(self, source: Callable[[], FleetSource], changed: Callable[[], None],
                 finished: Callable[[JobProgress], None]) -> None:
        """``source``: the app's current source (``:ctx`` replaces it); ``changed``: called
        after each answer that changed the list; ``finished``: once per job seen running
        that is no longer."""
        self.source = source
        self.changed = changed
        self.finished = finished
        self.jobs: list[JobProgress] = []
        self.supported = True  # False: this gateway (or a recording) has no jobs
        self._wake = asyncio.Event()

    @property
    def running(self) -> list[JobProgress]:
        return [j for j in self.jobs if j.state == "running"]

    def poke(self) -> None:
        """Ask again now (a job was created or cancelled, or the jobs screen opened)."""
        self._wake.set()

    def reset(self) -> None:
        """Another gateway (``:ctx``): its jobs are not these."""
        self.jobs = []
        self.supported = True
        self.poke()

    async def run(self) -> None:
        while True:
            await self.refresh()
            self._wake.clear()
            interval = BUSY_S if self.running else IDLE_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    async def refresh(self) -> None:
        try:
            answer = await self.source().query("jobs")
        except GatewayError as exc:
            if exc.code in ("unsupported", "forbidden", "unauthorized"):
                self.supported = False
                self._replace([])
            return  # unreachable: keep what was known; the header says the link is down
        self.supported = True
        self._replace(parse_jobs(answer))

    def _replace(self, jobs: list[JobProgress]) -> None:
        if jobs == self.jobs:
            return
        was_running = {j.id for j in self.running}
        self.jobs = jobs
        for job in jobs:
            if job.id in was_running and job.state != "running":
                self.finished(job)
        self.changed()
