"""A confirmed ``--filter`` selection handed to the gateway as a durable job, and followed.

The CLI sends one ``job_create`` with the targets fixed at confirmation; the gateway
records the job and drives it (console/gateway/job_driver.py), so a dropped SSH session no
longer stops the work halfway. The CLI then follows the job (``query what=job``) to its end
and prints the per-item results from the job's record; ctrl-c or a lost connection leaves the
job running (``irq jobs show ID``). ``--detach`` returns once the job is recorded.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from console.cli.answers import answer_dict
from console.cli.exits import ExitCode, fail
from console.cli.output import esc, hint, stderr_console

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.model import CommandResult, Decision

FOLLOW_POLL_S = 0.3  # how often the CLI asks for the job's progress
#: outcome and error of a target a cancelled job never sent
NOT_SENT = ("failed", "cancelled")


@dataclass
class JobRequest:
    """What the operator confirmed: the action (or decision) for these targets."""

    action: str  # the command action each target gets (``decide`` for decisions)
    targets: list[str]
    filter: str
    reason: str
    key: str | None
    rate_per_s: float | None
    decision: Decision | None = None
    merge_args: bool = False
    from_step: str | None = None  # a retry job: ``--from STEP`` for every target
    #: the job's id once created (ctrl-c after that: the job goes on)
    job_id: str = field(default="")


async def create_job(client: GatewayClient, req: JobRequest) -> str:
    """Record the job on the gateway; its id. A refusal exits with its code."""
    from console.cli.exits import code_for_result

    decision = (req.decision.model_dump(mode="json", exclude_none=True)
                if req.decision is not None else None)
    results = await client.job_command(
        "job_create", req.targets, reason=req.reason, key=req.key, job_action=req.action,
        filter=req.filter, rate_per_s=req.rate_per_s, decision=decision,
        merge_args=req.merge_args or None, from_step=req.from_step)
    if not results:
        fail(ExitCode.FAILED, "the gateway returned no result for the job")
    created = results[0]
    if created.outcome != "applied":
        fail(code_for_result(created), f"the job was not created: {created.detail}")
    req.job_id = created.target
    stderr_console().print(
        f"[bold]job[/] {esc(created.target)}: {esc(created.detail)}"
        + (" [dim](replayed: created before under this key)[/]" if created.replayed else ""))
    return created.target


async def follow_job(client: GatewayClient, job_id: str) -> dict[str, Any]:
    """Poll the job until it is no longer running; its detail (``query what=job``). A
    progress line on a terminal."""
    live = sys.stderr.isatty()
    shown = ""
    while True:
        job = answer_dict(await client.query("job", job_id=job_id), f"about job {job_id}")
        if live:
            line = (f"job {job_id}: {job['done']} done, {job['failed']} failed, "
                    f"{job['remaining']} remaining")
            if line != shown:
                sys.stderr.write(f"\r{line}\x1b[K")
                sys.stderr.flush()
                shown = line
        if job.get("state") != "running":
            if live:
                sys.stderr.write("\n")
            return job
        import asyncio  # not at import time: `irq --help` loads no asyncio

        await asyncio.sleep(FOLLOW_POLL_S)


def job_results(job: dict[str, Any], action: str) -> list[CommandResult]:
    """The per-item results of a finished (or cancelled) job, in target order."""
    from console.model import CommandResult

    out = []
    for index, item in enumerate(job.get("items") or []):
        outcome, error = item.get("outcome"), item.get("error")
        detail = item.get("detail") or ""
        if item.get("status") == "pending":  # a cancelled job never sent it
            outcome, error = NOT_SENT
            detail = f"job {job['id']} was cancelled before this target was sent"
        out.append(CommandResult(id=f"{job['id']}.{index}", action=action,
                                 target=str(item["target"]), outcome=outcome or "failed",
                                 error=error, detail=detail,
                                 new_run_id=item.get("new_run_id")))
    return out


def interrupted(req: JobRequest) -> None:
    """ctrl-c while following: the job is the gateway's; say how to find it."""
    if req.job_id:
        hint(f"stopped following; job {req.job_id} goes on: `irq jobs show {req.job_id}` "
             f"(or `irq jobs cancel {req.job_id}`)")
        raise SystemExit(int(ExitCode.FAILED))
    raise KeyboardInterrupt
