"""``irq tui`` (and bare ``irq``) and ``irq demo``.

The TUI is imported only inside these commands: the rest of the CLI never imports Textual.
``irq demo`` imports the demo launcher (``console.demo.launcher.run_demo``) inside the
command: it is the one place the CLI reaches the demo (tests/unit/test_layers.py allows this
import and no other), so the product commands never load demo code, and the demo itself never
imports the CLI (it starts ``irq serve`` and ``irq tui`` as child processes).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from console.cli.exits import ExitCode, diagnose, fail
from console.cli.options import ContextOption, TokenOption, UrlOption
from console.cli.session import connection_of

if TYPE_CHECKING:
    from console.config import Connection


def open_tui(conn: Connection, *, mouse: bool = False) -> bool:
    """Run the TUI until it exits; False (after saying why) when it is not available."""
    try:
        from console.tui.app import run_tui
    except ImportError as exc:
        diagnose(f"the terminal UI is not available ({exc})")
        print("  hint: every view has a subcommand: irq --help", file=sys.stderr, flush=True)
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
