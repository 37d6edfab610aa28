"""``irq retry --filter EXPR [--from STEP]``: retry every run a filter selects, as a durable
job the gateway drives (console/cli/bulk.py has the shared selection, confirmation and job).

A retry's plan needs the backend (each run's recorded steps), one run at a time; planning a
thousand runs before asking would make the operator wait for the work itself. The
confirmation therefore lists every target and the plans of a sample of them (the first
:data:`SAMPLE`); the gateway plans each run again when the job sends its retry, and a run
that cannot be retried then (running again, a step it does not have) is refused and recorded
as the job's failure with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.cli.bulk import (
    confirm_selection,
    finish,
    print_detached,
    refuse_empty,
    refuse_over_cap,
    run_job,
    select_runs,
)
from console.cli.bulk_jobs import JobRequest
from console.cli.output import OutputFormat, emit, esc, stderr_console, stdout_console, suggest
from console.cli.results import render_plan

if TYPE_CHECKING:
    from rich.console import Console

    from console.client import GatewayClient
    from console.config import Connection
    from console.model import Run

#: runs whose plan the confirmation shows
SAMPLE = 3


@dataclass
class RetrySelection:
    targets: list[str]
    runs: dict[str, Run]
    samples: list[dict[str, Any]]  # the plans of the first SAMPLE targets that have one
    refused: list[dict[str, str]]  # sample targets the gateway would not plan: why

    def contract(self, from_step: str | None) -> dict[str, Any]:
        """The dry run's JSON: the targets, the step, the sample plans and refusals."""
        return {"action": "retry", "targets": self.targets, "from_step": from_step,
                "samples": self.samples, "refused": self.refused}


async def _sample_plans(client: GatewayClient, targets: list[str], from_step: str | None
                        ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    from console.client import GatewayError

    samples: list[dict[str, Any]] = []
    refused: list[dict[str, str]] = []
    for target in targets[:SAMPLE]:
        try:
            plan = await client.query("plan", action="retry", targets=[target],
                                      from_step=from_step)
        except GatewayError as exc:
            refused.append({"target": target, "error": exc.code, "detail": str(exc)})
            continue
        if isinstance(plan, dict):
            samples.append(plan)
    return samples, refused


def render_retry_selection(expr: str, sel: RetrySelection, console: Console) -> None:
    console.print(f"[bold]filter[/] {esc(expr)}")
    render_plan({"action": "retry", "targets": sel.targets}, console,
                runs={rid: run.contract() for rid, run in sel.runs.items()})
    shown = len(sel.samples) + len(sel.refused)
    console.print(f"[bold]plans of {shown} of {len(sel.targets)} run(s)[/] [dim](the gateway "
                  "plans each run again when the job sends its retry)[/]")
    for plan in sel.samples:
        render_plan(plan, console)
    for refusal in sel.refused:
        console.print(f"  [bold red]{esc(refusal['target'])}: {esc(refusal['error'])}[/] "
                      f"{esc(refusal['detail'])}")


def bulk_retry(conn: Connection, expr: str, *, from_step: str | None, reason: str, yes: bool,
               dry_run: bool, key: str | None, output: OutputFormat, max_n: int,
               wait_s: float | None, rate_per_s: float | None, detach: bool) -> None:
    from console.cli.confirm import refuse_unconfirmable
    from console.cli.session import with_gateway

    refuse_unconfirmable(conn, "retry runs", yes=yes, dry_run=dry_run)

    async def select(client: GatewayClient) -> RetrySelection:
        runs = select_runs(client.view, expr)
        refuse_empty(len(runs), "runs", expr, "irq runs --state failed")
        if yes or dry_run:
            refuse_over_cap(len(runs), max_n, "runs", expr)
        targets = [r.id for r in runs]
        samples, refused = await _sample_plans(client, targets, from_step)
        return RetrySelection(targets, {r.id: r for r in runs}, samples, refused)

    sel = with_gateway(conn, select)
    step = f" --from {from_step}" if from_step else ""
    if dry_run:
        emit(output, sel.contract(from_step),
             lambda: render_retry_selection(expr, sel, stdout_console()))
        if output is OutputFormat.TEXT:
            suggest([f"irq retry --filter {expr!r}{step} --reason TEXT"])
        return
    if output is OutputFormat.TEXT or not yes:
        render_retry_selection(expr, sel, stderr_console())
    if not yes:
        confirm_selection(len(sel.targets), max_n, "runs",
                          f"retry these {len(sel.targets)} run(s)?")
    req = JobRequest("retry", sel.targets, expr, reason, key, rate_per_s, from_step=from_step)
    results, waited, job = run_job(conn, req, wait_s=wait_s, detach=detach)
    if detach:
        print_detached(job, output)
        return
    finish("retry", results, waited, output, ["irq runs --state failed", "irq audit"])
