"""``irq jobs``: the durable bulk jobs the gateway drives (``--filter`` on an action or a
decision creates one: console/cli/bulk.py).

``irq jobs`` lists them (newest first), ``irq jobs show ID`` gives the progress and every
failure with its reason, ``irq jobs cancel ID`` stops one (confirmed, default No; ``--yes``,
``--reason``; audited as ``job_cancel``): the targets in flight settle, the rest are not
sent. The JSON of a job (DESIGN.md §5): ``id``, ``action``, ``filter``, ``targets``,
``done``, ``failed``, ``remaining`` (counts), ``rate_per_s``, ``state`` (running | done |
cancelled), ``created_by``; ``show`` adds ``items``, ``failures`` and ``remaining_targets``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_dict, answer_list
from console.cli.exits import ExitCode
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import (
    ContextOption,
    KeyOption,
    OutputOption,
    ReasonOption,
    TokenOption,
    UrlOption,
    YesOption,
)
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    fmt_time,
    hint,
    make_table,
    print_table,
    stdout_console,
    styled,
    suggest,
)
from console.cli.session import connection_of, with_gateway

if TYPE_CHECKING:
    from console.client import GatewayClient

jobs_app = typer.Typer(
    cls=IrqGroup,
    help="Durable bulk jobs (--filter on an action or decision): list, show, cancel.",
    invoke_without_command=True,
)

JobArgument = Annotated[str, typer.Argument(metavar="ID", help="The job's id (irq jobs).")]


def _progress(job: dict[str, Any]) -> str:
    return f"{job['done']}/{job['targets']} done, {job['failed']} failed, " \
           f"{job['remaining']} remaining"


@jobs_app.callback()
def jobs_command(
    ctx: typer.Context,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """The jobs, newest first: action, filter, progress, state and who created them."""
    if ctx.invoked_subcommand is not None:
        return
    conn = connection_of(ctx, url, token, context)

    async def fetch(client: GatewayClient) -> list[dict[str, Any]]:
        return answer_list(await client.query("jobs"), "to a jobs query")

    jobs = with_gateway(conn, fetch, snapshot=False)

    def text() -> None:
        if not jobs:
            hint("no jobs (a --filter on an action or a decision creates one)")
            return
        table = make_table("id", "action", "state", "progress", "rate", "created", "by",
                           "filter")
        for j in jobs:
            table.add_row(esc(j["id"]), esc(j["action"]), styled(j["state"]), _progress(j),
                          f"{j['rate_per_s']:g}/s", fmt_time(j.get("created_at")),
                          esc(j["created_by"]), esc(j["filter"] or "-"))
        print_table(table)

    emit(output, jobs, text)


def _fetch_job(client: GatewayClient, job_id: str) -> Any:
    return client.query("job", job_id=job_id)


@jobs_app.command("show", cls=IrqCommand)
def jobs_show_command(
    ctx: typer.Context,
    job_id: JobArgument,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """One job: its progress and every failure with its reason."""
    conn = connection_of(ctx, url, token, context)
    job = answer_dict(with_gateway(conn, lambda c: _fetch_job(c, job_id), snapshot=False),
                      f"about job {job_id}")

    def text() -> None:
        out = stdout_console()
        out.print(f"[bold]job[/] {esc(job['id'])}  {styled(job['state'])}")
        out.print(f"  action   {esc(job['action'])} at {job['rate_per_s']:g}/s")
        out.print(f"  filter   {esc(job['filter'] or '-')}")
        out.print(f"  progress {_progress(job)}")
        out.print(f"  created  {fmt_time(job.get('created_at'))} by {esc(job['created_by'])}"
                  + (f" — {esc(job['reason'])}" if job.get("reason") else ""))
        if job.get("cancelled_by"):
            out.print(f"  cancelled by {esc(job['cancelled_by'])}"
                      + (f" — {esc(job['cancel_reason'])}" if job.get("cancel_reason") else ""))
        if job.get("driven_by"):
            out.print(f"  driven by gateway {esc(job['driven_by'])}")
        failures = job.get("failures") or []
        if failures:
            table = make_table("target", "outcome", "error", "detail")
            for f in failures:
                table.add_row(esc(f["target"]), styled(str(f["outcome"])),
                              esc(f.get("error") or "-"), esc(f.get("detail") or ""))
            print_table(table)
        steps = [f"irq jobs cancel {job['id']}"] if job["state"] == "running" else []
        suggest(steps + ["irq audit"])

    emit(output, job, text)


@jobs_app.command("cancel", cls=IrqCommand)
def jobs_cancel_command(
    ctx: typer.Context,
    job_id: JobArgument,
    reason: ReasonOption = "",
    yes: YesOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Stop a running job: the targets in flight settle, the rest are not sent."""
    from console.cli.confirm import ask_or_stop, refuse_unconfirmable
    from console.cli.results import print_results

    conn = connection_of(ctx, url, token, context)
    refuse_unconfirmable(conn, "cancel a job", yes=yes, dry_run=False)
    if not yes:
        job = with_gateway(conn, lambda c: _fetch_job(c, job_id), snapshot=False)
        if isinstance(job, dict):
            hint(f"job {job['id']}: {job['action']} ({job['state']}), {_progress(job)}")
        ask_or_stop(f"cancel job {job_id}?")

    async def cancel(client: GatewayClient) -> Any:
        return await client.job_command("job_cancel", [job_id], reason=reason, key=key)

    results = with_gateway(conn, cancel, snapshot=False)
    code = print_results(results, output)
    if output is OutputFormat.TEXT:
        suggest([f"irq jobs show {job_id}"])
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))
