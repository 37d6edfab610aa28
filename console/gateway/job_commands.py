"""The operator's side of durable bulk jobs: create and cancel (job_frames.py), and the
``jobs`` / ``job`` queries. The job itself is driven by job_driver.py.

Creating a job is one audited command (action ``job_create``, target the job id); each of
its targets is then sent as its own command through the executor and audited there, under
the creator's identity and the job's reason, with the command id ``JOB_ID.INDEX``.
Cancelling is audited as ``job_cancel``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from console.gateway.auth import Principal
from console.gateway.job_driver import JobDriver
from console.gateway.job_frames import JobCommand
from console.gateway.job_store import Job, JobStore, NewJob, job_id_for
from console.gateway.protocol import DecisionBody, FrameError, Query
from console.model import CommandResult, Outcome, Role

#: jobs listed by ``query what=jobs`` unless ``limit`` says otherwise
LISTED = 100


class JobCommands:
    def __init__(self, store: JobStore, driver: JobDriver, *, default_rate_per_s: float,
                 audit: Callable[[Principal, CommandResult, str], None]) -> None:
        """``audit``: records and publishes an audit entry (command_book.CommandBook.audit)."""
        self.store, self.driver = store, driver
        self.default_rate_per_s = default_rate_per_s
        self.audit = audit

    async def execute(self, cmd: JobCommand, who: Principal) -> list[CommandResult]:
        if not who.role.at_least(Role.OPERATOR):
            return [self._result(cmd, cmd.targets[0] if cmd.action == "job_cancel" else "",
                                 "forbidden", error="forbidden",
                                 detail=f"role {who.role.value} cannot {cmd.action}; "
                                 "operator or admin required", who=who)]
        if cmd.dry_run:
            raise FrameError("invalid", "a job has no dry run: ask for the plan "
                             "(query what=plan) before creating it", cmd.id)
        if cmd.action == "job_cancel":
            return [await self._cancel(cmd, who)]
        return [await self._create(cmd, who)]

    async def _create(self, cmd: JobCommand, who: Principal) -> CommandResult:
        assert cmd.job_action is not None  # job_frames checked it
        job_id = job_id_for(f"{who.identity}\n{cmd.id}")
        rate = cmd.rate_per_s or self.default_rate_per_s
        try:
            decision = (DecisionBody.model_validate(cmd.decision).model_dump(
                mode="json", exclude_none=True) if cmd.decision is not None else None)
        except ValidationError as exc:
            raise FrameError("invalid", f"decision: {exc.errors()[0]['msg']}", cmd.id) from None
        created = await asyncio.to_thread(self.store.create, job_id, NewJob(
            action=cmd.job_action.value, targets=cmd.targets, filter=cmd.filter,
            reason=cmd.reason, rate_per_s=rate, created_by=who.identity, role=who.role.value,
            decision=decision, merge_args=cmd.merge_args, from_step=cmd.from_step))
        what = decision["kind"] if decision is not None else cmd.job_action.value
        if not created:
            return CommandResult(id=cmd.id, action=cmd.action, target=job_id,
                                 outcome="applied", replayed=True,
                                 detail="already created under this key")
        self.driver.kick()
        return self._result(cmd, job_id, "applied", who=who, detail=(
            f"{what} {len(cmd.targets)} target(s) at {rate:g}/s"
            + (f" from step {cmd.from_step}" if cmd.from_step else "")
            + (f", filter {cmd.filter!r}" if cmd.filter else "")))

    async def _cancel(self, cmd: JobCommand, who: Principal) -> CommandResult:
        job_id = cmd.targets[0]
        job = await asyncio.to_thread(self.store.job, job_id)
        if job is None:
            return self._result(cmd, job_id, "failed", error="not_found",
                                detail=f"no such job: {job_id}", who=who)
        if not await asyncio.to_thread(self.store.cancel, job_id, who.identity, cmd.reason):
            return self._result(cmd, job_id, "conflict", error="conflict",
                                detail=f"job {job_id} is already {job.state}", who=who)
        self.driver.stop_job(job_id)
        done = await asyncio.to_thread(self.store.job, job_id)
        counts = done.contract() if done is not None else job.contract()
        return self._result(cmd, job_id, "applied", who=who, detail=(
            f"cancelled: {counts['done']} done, {counts['failed']} failed, "
            f"{counts['remaining']} not sent"))

    def _result(self, cmd: JobCommand, target: str, outcome: Outcome, *, who: Principal,
                error: str | None = None, detail: str = "") -> CommandResult:
        result = CommandResult(id=cmd.id, action=cmd.action, target=target, outcome=outcome,
                               error=error, detail=detail)
        self.audit(who, result, cmd.reason)
        return result

    # ----------------------------------------------------------------------- queries

    async def answer(self, q: Query) -> Any:
        if q.what == "jobs":
            jobs = await asyncio.to_thread(self.store.jobs, q.limit or LISTED)
            return [job.contract() for job in jobs]
        if not q.job_id:
            raise FrameError("invalid", "job needs 'job_id'", q.id)
        job = await asyncio.to_thread(self.store.job, q.job_id)
        if job is None:
            raise FrameError("not_found", f"no such job: {q.job_id}", q.id)
        return await asyncio.to_thread(self.detail, job)

    def detail(self, job: Job) -> dict[str, Any]:
        """``irq jobs show``: the counts, and every target with its outcome (failures with
        their reasons)."""
        rows = self.store.targets(job.id)
        data = job.contract()
        data["items"] = [{"status": r.status, **r.contract()} for r in rows]
        data["failures"] = [r.contract() for r in rows if r.status == "failed"]
        data["remaining_targets"] = [r.target for r in rows if r.status == "pending"]
        return data
