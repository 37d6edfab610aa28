"""The ``irq`` command (typer). Never imports Textual; heavy imports live inside commands.

Exit codes: 0 ok, 1 failed, 2 usage, 3 not found, 4 conflict, 5 unauthorized or forbidden,
6 gateway or backend unreachable. Data on stdout, diagnostics on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from console.cli import (
    actions,
    admin,
    alerts,
    audit,
    decisions,
    inbox,
    launch,
    leaks,
    obligations,
    per_call,
    policy,
    release,
    retry,
    runs,
    show,
    watch,
)
from console.cli.completion import COMPLETE_VAR
from console.cli.contexts import ctx_app
from console.cli.drill import drill_command
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.jobs import jobs_app
from console.cli.notify import notify_app
from console.cli.session import GlobalOptions
from console.cli.tokens import token_app

#: how the ``irq`` Typer is made (every subcommand, or one: :func:`irq_app`)
APP_SETTINGS: dict[str, Any] = {
    "name": "irq",
    "help": "Operations console for interrupt and preemption management of agent workloads."
    "\n\nWithout a subcommand, opens the terminal UI.",
    "invoke_without_command": True,
    "no_args_is_help": False,
    "add_completion": True,
    "cls": IrqGroup,
    "pretty_exceptions_enable": False,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}


def version_line() -> str:
    """``irq 0.1.0 (gateway protocol 1)``: the product, its version, the wire protocol."""
    from importlib.metadata import PackageNotFoundError, version

    from console.protocol_version import PROTOCOL_VERSION  # not the gateway's models

    try:
        installed = version("irq")
    except PackageNotFoundError:
        installed = "unknown"
    return f"irq {installed} (gateway protocol {PROTOCOL_VERSION})"


def _version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit()


def root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="IRQ_URL",
            show_default=False,
            help="Gateway URL, ws:// or wss:// (default: the context's, else ws://127.0.0.1:7433).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="IRQ_TOKEN", show_default=False, help="Bearer token."),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            envvar="IRQ_CONTEXT",
            show_default=False,
            help="Context from the config file (default: its current_context).",
        ),
    ] = None,
    version: Annotated[
        bool | None,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the product, its version and the gateway protocol version.",
        ),
    ] = None,
) -> None:
    """Operations console for interrupt and preemption management of agent workloads."""
    ctx.obj = GlobalOptions(url=url, token=token, context=context)
    if ctx.invoked_subcommand is not None or ctx.resilient_parsing:
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        typer.echo(ctx.get_help())
        raise typer.Exit()
    if not launch.open_tui(ctx.obj.connection()):
        raise typer.Exit()


#: the subcommands in the order help lists them: (name, help panel, a command's function or
#: a group's Typer)
SUBCOMMANDS: list[tuple[str, str, Callable[..., None] | typer.Typer]] = [
    # read
    ("runs", "Observe", runs.runs_command),
    ("show", "Observe", show.show_command),
    ("inbox", "Observe", inbox.inbox_command),
    ("watch", "Observe", watch.watch_command),
    ("audit", "Observe", audit.audit_command),
    ("leaks", "Observe", leaks.leaks_command),
    # act on runs
    *((name, "Act on runs", actions.make_action_command(name))
      for name in ("pause", "resume", "cancel", "terminate")),
    ("retry", "Act on runs", retry.retry_command),
    ("release", "Act on runs", release.release_command),
    ("drill", "Act on runs", drill_command),
    ("jobs", "Act on runs", jobs_app),
    # decide interrupts
    ("approve", "Decide interrupts", decisions.approve_command),
    ("edit", "Decide interrupts", decisions.edit_command),
    ("reject", "Decide interrupts", decisions.reject_command),
    ("respond", "Decide interrupts", decisions.respond_command),
    ("decide", "Decide interrupts", per_call.decide_calls_command),
    # policy
    ("policy", "Policy", policy.policy_app),
    ("obligations", "Policy", obligations.obligations_command),
    ("obligation", "Policy", obligations.obligation_app),
    ("alerts", "Alerts", alerts.alerts_app),
    # run
    ("tui", "Run", launch.tui_command),
    ("demo", "Run", launch.demo_command),
    ("serve", "Run", admin.serve_command),
    ("token", "Run", token_app),
    ("ctx", "Run", ctx_app),
    ("notify", "Run", notify_app),
]


def irq_app(only: str | None = None) -> typer.Typer:
    """The ``irq`` command with every subcommand, or with ``only`` that one: typer builds the
    click command of every subcommand it holds on every run (60 ms for irq's 39 on this
    machine), and a command line that names its subcommand first needs just that one."""
    made = typer.Typer(**APP_SETTINGS)
    made.callback()(root)
    for name, panel, what in SUBCOMMANDS:
        if only is not None and name != only:
            continue
        if isinstance(what, typer.Typer):
            made.add_typer(what, name=name, rich_help_panel=panel)
        else:  # the plain help layout (console/cli/help_layout.py)
            made.command(name, rich_help_panel=panel, cls=IrqCommand)(what)
    return made


app = irq_app()


def app_for(args: list[str]) -> typer.Typer:
    """What runs ``irq ARGS``: the one-subcommand app when ``args`` start with a subcommand's
    name (not a global option before it, not a completion request: those see every one)."""
    names = {name for name, _panel, _what in SUBCOMMANDS}
    if args and args[0] in names and COMPLETE_VAR not in os.environ:
        return irq_app(only=args[0])
    return app


def main() -> None:
    """Console-script entry point: never a traceback unless IRQ_DEBUG is set."""
    from console.cli.completion import completion_request_problem
    from console.cli.exits import ExitCode
    from console.cli.help_import import lean_help_renderer
    from console.cli.wait import bare_wait

    lean_help_renderer()  # help pages and usage errors: typer's renderer, ~40 ms lighter
    refused = completion_request_problem(os.environ)
    if refused is not None:
        print(f"irq: {refused}", file=sys.stderr)
        print("  hint: `irq --install-completion` sets up the shell's completion", file=sys.stderr)
        sys.exit(int(ExitCode.USAGE))
    try:
        args = bare_wait(sys.argv[1:])
        app_for(args)(prog_name="irq", args=args)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        if os.environ.get("IRQ_DEBUG"):
            raise
        from console.terminal_text import terminal_safe  # the message may quote foreign text

        message = terminal_safe(f"{type(exc).__name__}: {exc}", multiline=True)
        print(f"irq: internal error: {message}", file=sys.stderr)
        print("  hint: set IRQ_DEBUG=1 to see the traceback", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
