"""Drives the durable bulk jobs (job_store.py) this gateway holds, at each job's rate.

One loop (:meth:`JobDriver.run`, started with the gateway's other loops) takes a lease round
every :data:`ROUND_S`: it renews the leases of the jobs it drives, takes running jobs whose
lease is free or lapsed (a peer on the same PostgreSQL died: within ``LEASE_TTL_S +
ROUND_S``), and stops driving a job that was cancelled or whose lease it lost. Each job it
drives is one task that sends the pending targets one command each through the command
executor -- the same checks, journal, backend call and audit as an operator's command --
paced at the job's rate with at most :data:`IN_FLIGHT` commands open.

A target is never acted on twice: its command's idempotency key is the job id and the
target's position (job_store.target_key), so a target sent again after a crash (the table
here not yet updated) gets the journal's settled result back, and an intent the dead gateway
left is adopted and re-driven once (commands.py). A command still ``in_progress`` (its intent
held by a live gateway) or refused ``unreachable`` before any intent (backends not read yet)
stays pending and is sent again later; every other result is recorded with its outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from console.gateway.auth import Principal
from console.gateway.commands import CommandExecutor
from console.gateway.hub import Hub
from console.gateway.job_store import Job, JobStore, TargetRow, target_key
from console.gateway.journal_store import JournalUnavailable
from console.gateway.protocol import Command, DecisionBody
from console.model import Action, CommandResult, Role

log = logging.getLogger("irq.gateway")

ROUND_S = 1.0  # lease round: renew, take, notice cancellations
IN_FLIGHT = 8  # commands of one job open at once
RETRY_PAUSE_S = 0.5  # before sending the targets left pending again
#: outcomes that count a target done (``recorded``: a four-eyes approval recorded)
DONE_OUTCOMES = ("applied", "recorded")


class JobDriver:
    def __init__(self, hub: Hub, store: JobStore, executor: CommandExecutor, *,
                 ready: Callable[[], Awaitable[None]] | None = None) -> None:
        """``ready``: awaited before the first round (every backend polled once, so a target
        is not refused as unknown while the gateway starts)."""
        self.hub, self.store, self.executor = hub, store, executor
        self.ready = ready
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.stops: dict[str, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self.sent = 0  # commands sent by this gateway's jobs (stats)

    def kick(self) -> None:
        """A job was created here: take it at once rather than at the next round."""
        self._wake.set()

    def stop_job(self, job_id: str) -> None:
        """Send no more of ``job_id``'s targets (cancelled here; commands in flight settle)."""
        stop = self.stops.get(job_id)
        if stop is not None:
            stop.set()

    async def run(self) -> None:
        if self.ready is not None:
            await self.ready()
        try:
            while True:
                try:
                    held = await asyncio.to_thread(self.store.lease_round)
                except Exception:
                    log.exception("the job lease round failed")
                    held = set()  # a lease not renewed lapses: a peer may drive the job
                self._reconcile(held)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), ROUND_S)
        finally:
            for task in self.tasks.values():
                task.cancel()

    def release(self) -> None:
        """A clean stop (blocking): the jobs driven here are free for a peer at once."""
        self.store.release(list(self.tasks))

    def _reconcile(self, held: set[str]) -> None:
        for job_id in list(self.tasks):
            if self.tasks[job_id].done():
                del self.tasks[job_id]
                self.stops.pop(job_id, None)
            elif job_id not in held:  # cancelled, or the lease went to a peer
                self.stop_job(job_id)
        for job_id in held - set(self.tasks):
            self.stops[job_id] = asyncio.Event()
            self.tasks[job_id] = asyncio.create_task(self._drive(job_id, self.stops[job_id]))

    # ------------------------------------------------------------------------ one job

    async def _drive(self, job_id: str, stop: asyncio.Event) -> None:
        try:
            job = await asyncio.to_thread(self.store.job, job_id)
            while job is not None and job.state == "running" and not stop.is_set():
                pending = await asyncio.to_thread(self.store.targets, job_id, "pending")
                if not pending:
                    if await asyncio.to_thread(self.store.finish_if_sent, job_id):
                        self._announce(await asyncio.to_thread(self.store.job, job_id))
                    return
                await self._send_all(job, pending, stop)
                if not stop.is_set():
                    await asyncio.sleep(RETRY_PAUSE_S)
                job = await asyncio.to_thread(self.store.job, job_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # the next round starts the job again
            log.exception("driving job %s failed", job_id)

    async def _send_all(self, job: Job, pending: list[TargetRow], stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(IN_FLIGHT)
        interval = 1.0 / job.rate_per_s if job.rate_per_s > 0 else 0.0
        next_at = loop.time()
        sending: set[asyncio.Task[None]] = set()

        async def one(row: TargetRow) -> None:
            try:
                await self._send(job, row)
            finally:
                gate.release()

        for row in pending:
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            next_at = max(next_at, loop.time() - interval) + interval
            await gate.acquire()
            if stop.is_set():
                gate.release()
                break
            task = asyncio.create_task(one(row))
            sending.add(task)
            task.add_done_callback(sending.discard)
        if sending:
            await asyncio.gather(*sending, return_exceptions=True)

    async def _send(self, job: Job, row: TargetRow) -> None:
        key = target_key(job.id, row.index)
        cmd = Command(type="command", id=key, action=Action(job.action), targets=[row.target],
                      reason=job.reason, decision=self._decision(job, row.target),
                      from_step=job.from_step)
        who = Principal(job.created_by, Role(job.role))
        self.sent += 1
        try:
            result = (await self.executor.execute(cmd, who))[0]
        except JournalUnavailable as exc:  # stays pending: sent again under the same key
            log.warning("job %s, %s: %s", job.id, row.target, exc)
            return
        if await self._later(result, key, row.target):
            return
        await asyncio.to_thread(
            self.store.record, job.id, row.index, ok=result.outcome in DONE_OUTCOMES,
            outcome=result.outcome, error=result.error, detail=result.detail,
            new_run_id=result.new_run_id)

    async def _later(self, result: CommandResult, key: str, target: str) -> bool:
        """Whether ``result`` leaves the target pending: its command is still running
        (elsewhere, or a dead gateway's intent not adopted yet), or nothing was done because
        the gateway had not read the backends yet (no intent under the key)."""
        if result.error == "in_progress":
            return True
        if result.error == "unreachable" and not result.replayed:
            row = await asyncio.to_thread(self.executor.journal.command, key, target)
            return row is None
        return False

    def _decision(self, job: Job, target: str) -> DecisionBody | None:
        if job.decision is None:
            return None
        body = dict(job.decision)
        if job.merge_args:  # an edit laid over each interrupt's own arguments
            intr = self.hub.interrupts.get(target)
            body["args"] = {**(intr.args if intr is not None else {}), **(body.get("args") or {})}
        return DecisionBody.model_validate(body)

    def _announce(self, job: Job | None) -> None:
        """A notice to every client (the TUI shows it; ``irq watch`` prints it)."""
        if job is None:
            return
        c = job.contract()
        self.hub.publish("notice", {
            "level": "warning" if c["failed"] else "info", "job": job.id,
            "message": f"job {job.id} ({c['action']}) done: {c['done']} done, "
                       f"{c['failed']} failed of {c['targets']}"})
