"""``irq release RUN RESOURCE --force``: free a resource irq believes leaked (``irq leaks``)
by the release declared for its kind: the config's ``[resources.KIND] release_command``, or
the release callback the run's agent registered. The gateway plans it (what will be called),
the CLI shows that and confirms (default No), the gateway runs it, audits it (action
``release``) and verifies it on the run's next observation; the result says ``verified`` or
``not yet verified`` (then it stays a suspected leak). console/gateway/release_commands.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from console.cli.completion import complete_run_ids
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode, fail
from console.cli.options import (
    ContextOption,
    DryRunOption,
    KeyOption,
    OutputOption,
    ReasonOption,
    TokenOption,
    UrlOption,
    YesOption,
)
from console.cli.output import OutputFormat, emit, stderr_console, stdout_console, suggest
from console.cli.results import print_results, render_plan
from console.cli.session import connection_of, expand_run_id, plan_one_run, with_gateway

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.model import CommandResult

ReleaseRunArgument = Annotated[
    str,
    typer.Argument(help="Run id, native id, or an unambiguous prefix of them.",
                   show_default=False, metavar="RUN", autocompletion=complete_run_ids),
]
ResourceArgument = Annotated[
    str,
    typer.Argument(help="The resource's id, as `irq leaks` or `irq show RUN` lists it.",
                   show_default=False, metavar="RESOURCE"),
]
ForceOption = Annotated[
    bool,
    typer.Option("--force", help="Required: release it although irq cannot see the run "
                 "release it itself (the run may still be using it).", show_default=False),
]



def _next_steps(target: str, results: list[CommandResult]) -> list[str]:
    if not results or results[0].outcome != "applied":
        return []
    return ["irq leaks", f"irq audit --target {target}"]


def release_command(
    ctx: typer.Context,
    run: ReleaseRunArgument,
    resource: ResourceArgument,
    force: ForceOption = False,
    reason: ReasonOption = "",
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Force a resource of a run free by the release declared for its kind (a
    release_command for the kind in the config file, or the agent's release callback);
    verified on the run's next observation."""
    if not force and not dry_run:
        fail(ExitCode.USAGE, "irq release frees a resource behind the run's back: pass --force",
             hint="see what it would call first with --dry-run")
    conn = connection_of(ctx, url, token, context)
    refuse_unconfirmable(conn, "release", yes=yes, dry_run=dry_run)
    if dry_run or not yes:
        target, plan, runs = with_gateway(
            conn, lambda c: plan_one_run(c, run, "release", resource=resource))
        if dry_run:
            emit(output, plan, lambda: render_plan(plan, stdout_console(), runs=runs))
            if output is OutputFormat.TEXT:
                suggest([f"irq release {target} {resource} --force --reason TEXT"])
            return
        render_plan(plan, stderr_console(), runs=runs)
        ask_or_stop(f"release {resource} of {target}?")
        run = target

    async def act(client: GatewayClient) -> list[CommandResult]:
        target = expand_run_id(client.view, run)
        return await client.command("release", [target], reason=reason, key=key,
                                    resource=resource)

    results = with_gateway(conn, act)
    code = print_results(results, output)
    if output is OutputFormat.TEXT:
        suggest(_next_steps(run, results))
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))
