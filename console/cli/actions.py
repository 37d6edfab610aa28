"""``irq pause|resume|cancel|terminate RUN...``: list what is affected and the plan, confirm
(default No), act, print a per-item result table, suggest the next command."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_dict
from console.cli.bulk import DEFAULT_MAX, bulk_action, refuse_ids_and_filter
from console.cli.completion import complete_run_ids
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode, fail
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
from console.cli.session import connection_of, expand_run_ids, with_gateway
from console.cli.wait import refuse_bad_wait

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.config import Connection
    from console.model import CommandResult

ACTION_HELP: dict[str, str] = {
    "pause": "Pause runs: resumable; resources with on_pause=keep stay reserved, the rest are "
    "released.",
    "resume": "Resume paused runs from their last journaled step.",
    "cancel": "Cancel runs: terminal and graceful; every resource is released unless "
    "on_cancel=keep.",
    "terminate": "Terminate runs: terminal, no cleanup; held resources may leak.",
}

RunsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        help="Run ids, native ids, or unambiguous prefixes of them (or --filter).",
        show_default=False,
        metavar="RUN...",
        autocompletion=complete_run_ids,
    ),
]


@dataclass
class Preview:
    targets: list[str]
    plan: dict[str, Any]
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)


async def _preview(client: GatewayClient, action: str, queries: list[str]) -> Preview:
    targets = expand_run_ids(client.view, queries)
    plan = answer_dict(await client.query("plan", action=action, targets=targets),
                       f"to a {action} plan query")
    planned = set(plan.get("targets") or [])
    unknown = [t for t in targets if t not in planned and t not in client.view.runs]
    if unknown:
        fail(
            ExitCode.NOT_FOUND,
            "no such run: " + ", ".join(unknown),
            hint="list them with `irq runs`",
        )
    runs = {t: client.view.runs[t].contract() for t in targets if t in client.view.runs}
    return Preview(targets, plan, runs)


def _next_steps(action: str, targets: list[str], results: list[CommandResult]) -> list[str]:
    applied = [r.target for r in results if r.outcome == "applied"]
    one = applied[0] if len(applied) == 1 else None
    if not applied:
        return ["irq runs"] if any(r.error == "not_found" for r in results) else []
    if action == "pause":
        return [
            f"irq show {one}" if one else "irq runs --state paused",
            f"irq resume {' '.join(applied)}",
        ]
    if action == "resume":
        return [f"irq show {one}" if one else "irq runs"]
    return [f"irq audit --target {one}" if one else "irq audit", "irq runs"]


def run_action(
    conn: Connection,
    action: str,
    runs: list[str],
    *,
    reason: str,
    yes: bool,
    dry_run: bool,
    key: str | None,
    output: OutputFormat,
    wait_s: float | None = None,
) -> None:
    refuse_unconfirmable(conn, action, yes=yes, dry_run=dry_run)

    if dry_run:
        preview = with_gateway(conn, lambda c: _preview(c, action, runs))
        emit(
            output,
            preview.plan,
            lambda: render_plan(preview.plan, stdout_console(), runs=preview.runs),
        )
        if output is OutputFormat.TEXT:
            suggest([f"irq {action} {' '.join(preview.targets)} --reason TEXT"])
        return

    if not yes:
        preview = with_gateway(conn, lambda c: _preview(c, action, runs))
        render_plan(preview.plan, stderr_console(), runs=preview.runs)
        ask_or_stop(f"{action} {len(preview.targets)} run(s)?")
        queries = preview.targets
    else:
        queries = runs

    async def act(client: GatewayClient) -> list[CommandResult]:
        targets = expand_run_ids(client.view, queries)
        return await client.command(action, targets, reason=reason, key=key)

    if wait_s is not None:  # subscribed: wait for the effect on the same connection
        from console.cli.bulk import finish
        from console.cli.wait import wait_for_effects

        async def act_and_wait(client: GatewayClient) -> tuple[list[CommandResult], Any]:
            results = await act(client)
            applied = [r.target for r in results if r.outcome == "applied"]
            return results, await wait_for_effects(client, action, applied, wait_s)

        results, waited = with_gateway(conn, act_and_wait, subscribe=True)
        finish(action, results, waited, output, _next_steps(action, queries, results))
        return

    results = with_gateway(conn, act)
    code = print_results(results, output)
    if output is OutputFormat.TEXT:
        suggest(_next_steps(action, queries, results))
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


def make_action_command(action: str) -> Callable[..., None]:
    def command(
        ctx: typer.Context,
        runs: RunsArgument = None,
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
        refuse_ids_and_filter(runs or [], filter_expr, "run")
        refuse_bad_wait(wait)
        conn = connection_of(ctx, url, token, context)
        if filter_expr is not None:
            bulk_action(
                conn,
                action,
                filter_expr,
                reason=reason,
                yes=yes,
                dry_run=dry_run,
                key=key,
                output=output,
                max_n=max_n,
                wait_s=wait,
                rate_per_s=parse_rate(rate),
                detach=detach,
            )
            return
        run_action(
            conn,
            action,
            runs or [],
            reason=reason,
            yes=yes,
            dry_run=dry_run,
            key=key,
            output=output,
            wait_s=wait,
        )

    command.__name__ = f"{action}_command"
    command.__doc__ = ACTION_HELP[action]
    return command
