"""``irq tui`` (and bare ``irq``) and ``irq demo``.

The TUI is imported only inside these commands: the rest of the CLI never imports Textual.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.session import ContextOption, TokenOption, UrlOption, connection_of

if TYPE_CHECKING:
    from console.config import Connection

CLI_TOUR = """\
Use the command line:
  irq runs                       runs with state, heartbeat age, resources
  irq inbox                      interrupts waiting for a decision
  irq show RUN                   one run: resources, journal, heartbeats, audit
  irq approve INTERRUPT          (also: edit --args JSON, reject --feedback, respond --text)
  irq pause RUN --dry-run        the plan: which resources are kept, which released
  irq pause RUN --reason TEXT    then: irq resume RUN
  irq watch                      live events as JSON lines
  irq audit                      who did what, why, and what happened
Every listing takes -o json or -o jsonl; run `irq COMMAND --help` for details."""


def open_tui(conn: Connection, *, mouse: bool = False) -> bool:
    """Run the TUI until it exits; False (after saying why) when it is not available."""
    try:
        from console.tui.app import run_tui
    except ImportError as exc:
        diagnose(f"the terminal UI is not available ({exc})")
        print(CLI_TOUR, file=sys.stderr)
        return False
    run_tui(conn, mouse=mouse)
    return True


def tui_command(
    ctx: typer.Context,
    mouse: Annotated[bool, typer.Option("--mouse", help="Enable mouse support.")] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Open the terminal UI (the default when irq runs without a subcommand)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail(
            ExitCode.USAGE,
            "the terminal UI needs a terminal; use the subcommands in scripts",
            hint="irq --help",
        )
    if not open_tui(connection_of(ctx, url, token, context), mouse=mouse):
        raise typer.Exit(int(ExitCode.FAILED))


def demo_command(
    no_tui: Annotated[
        bool,
        typer.Option("--no-tui", help="Do not open the TUI; run until SIGINT/SIGTERM."),
    ] = False,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            "-p",
            min=1,
            max=65535,
            help="Gateway port (a free one is chosen when it is busy).",
        ),
    ] = 7433,
    mouse: Annotated[bool, typer.Option("--mouse", help="Enable mouse in the TUI.")] = False,
) -> None:
    """Start a local gateway and a demo fleet of real DBOS agents, then open the TUI."""
    from console.demo.launcher import run_demo

    code = run_demo(port=port, tui=not no_tui, mouse=mouse)
    if code:
        raise typer.Exit(code)
