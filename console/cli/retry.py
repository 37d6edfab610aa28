"""``irq retry RUN [--from STEP]``: re-run a failed, given-up, cancelled or terminated run
from its failed step (or STEP), keeping the journaled results before it.

Shows the plan first (steps kept, steps that run again, side effects that happen twice),
confirms (default No), sends one command whose key is the backend's request id, prints the
result and, with ``--wait``, follows the run that carries the work (the new run after a fork)
until it runs. A run that cannot be retried (still running, paused, ...) exits 4 with what to
do instead; the gateway decides that (console/retry_rules.py), the CLI only shows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from console.cli.bulk import DEFAULT_MAX
from console.cli.completion import complete_run_ids
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode
from console.cli.options import (
    ContextOption,
    DetachOption,
    DryRunOption,
    KeyOption,
    MaxOption,
    OutputOption,
    RateOption,
    ReasonOption,
    TargetFilterOption,
    TokenOption,
    UrlOption,
    WaitOption,
    YesOption,
    parse_rate,
)
from console.cli.output import OutputFormat, emit, stderr_console, stdout_console, suggest
from console.cli.results import print_results, render_plan
from console.cli.session import connection_of, expand_run_id, plan_one_run, with_gateway
from console.cli.wait import refuse_bad_wait

if TYPE_CHECKING:
    from console.cli.wait import Waited
    from console.client import GatewayClient
    from console.config import Connection
    from console.model import CommandResult

RetryRunArgument = Annotated[
    str | None,
    typer.Argument(
        help="Run id, native id, or an unambiguous prefix of them (or --filter).",
        show_default=False,
        metavar="RUN",
        autocompletion=complete_run_ids,
    ),
]
FromStepOption = Annotated[
    str | None,
    typer.Option(
        "--from",
        metavar="STEP",
        help="The first step to run again: its name or its index in `irq show RUN` "
        "(default: the step that failed). Steps before it keep their journaled results.",
        show_default=False,
    ),
]



def _next_steps(target: str, results: list[CommandResult]) -> list[str]:
    applied = [r for r in results if r.outcome == "applied"]
    if not applied:
        return []
    carrier = applied[0].new_run_id or target
    return [f"irq show {carrier}", f"irq audit --target {target}"]


def retry_run(conn: Connection, run: str, *, from_step: str | None, reason: str, yes: bool,
              dry_run: bool, key: str | None, output: OutputFormat,
              wait_s: float | None) -> None:
    refuse_unconfirmable(conn, "retry", yes=yes, dry_run=dry_run)
    if dry_run or not yes:
        target, plan, runs = with_gateway(
            conn, lambda c: plan_one_run(c, run, "retry", from_step=from_step))
        if dry_run:
            emit(output, plan, lambda: render_plan(plan, stdout_console(), runs=runs))
            if output is OutputFormat.TEXT:
                step = f" --from {plan['from_step']}" if plan.get("from_step") else ""
                suggest([f"irq retry {target}{step} --reason TEXT"])
            return
        render_plan(plan, stderr_console(), runs=runs)
        ask_or_stop(f"retry {target}?")
        run = target

    async def act(client: GatewayClient) -> list[CommandResult]:
        target = expand_run_id(client.view, run)
        return await client.command("retry", [target], reason=reason, key=key,
                                    from_step=from_step)

    if wait_s is not None:  # subscribed: wait for the run that carries the work
        from console.cli.bulk import finish
        from console.cli.wait import in_place_marks, run_mark, wait_for_effects

        async def act_and_wait(client: GatewayClient) -> tuple[list[CommandResult],
                                                               list[Waited]]:
            # the run as seen before: its failed state is not the outcome of a retry that
            # keeps its id
            seen = client.view.runs.get(expand_run_id(client.view, run))
            before = {seen.id: run_mark(seen)} if seen is not None else {}
            results = await act(client)
            carriers = [r.new_run_id or r.target for r in results if r.outcome == "applied"]
            return results, await wait_for_effects(client, "retry", carriers, wait_s,
                                                   seen_before=in_place_marks(results, before))

        results, waited = with_gateway(conn, act_and_wait, subscribe=True)
        finish("retry", results, waited, output, _next_steps(run, results))
        return

    results = with_gateway(conn, act)
    code = print_results(results, output)
    if output is OutputFormat.TEXT:
        suggest(_next_steps(run, results))
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


def retry_command(
    ctx: typer.Context,
    run: RetryRunArgument = None,
    from_step: FromStepOption = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
    rate: RateOption = None,
    detach: DetachOption = False,
    wait: WaitOption = None,
    reason: ReasonOption = "",
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Retry a failed, given-up, cancelled or terminated run from its failed step (or
    --from STEP), keeping the journaled results before it; side effects outside the journal
    happen twice (the plan lists them). With --filter: every run the filter selects (e.g.
    'state:failed error:timeout'), as a job the gateway drives (irq jobs)."""
    from console.cli.bulk import refuse_ids_and_filter

    refuse_ids_and_filter([run] if run else [], filter_expr, "run")
    refuse_bad_wait(wait)
    conn = connection_of(ctx, url, token, context)
    if filter_expr is not None:
        from console.cli.bulk_retry import bulk_retry

        bulk_retry(conn, filter_expr, from_step=from_step, reason=reason, yes=yes,
                   dry_run=dry_run, key=key, output=output, max_n=max_n, wait_s=wait,
                   rate_per_s=parse_rate(rate), detach=detach)
        return
    assert run is not None  # refuse_ids_and_filter: one of them
    retry_run(conn, run, from_step=from_step, reason=reason, yes=yes, dry_run=dry_run,
              key=key, output=output, wait_s=wait)
