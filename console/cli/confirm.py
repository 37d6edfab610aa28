"""One confirmation path for every mutation (run actions and interrupt decisions, one by
id or many by filter): a read-only context refuses, no terminal and no --yes refuses
(exit 2), and on a terminal the operator sees what will happen and answers a question
whose default is No."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from console.cli.exits import ExitCode, fail
from console.cli.output import hint
from console.cli.session import read_only_guard

if TYPE_CHECKING:
    from console.config import Connection


def interactive() -> bool:
    """Whether we may ask the operator (stdin is a terminal)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def refuse_unconfirmable(conn: Connection, what: str, *, yes: bool, dry_run: bool) -> None:
    """Before connecting: exit 5 in a read-only context, exit 2 when nobody can confirm
    (stdin is not a terminal and --yes was not given). A dry run changes nothing: it passes."""
    if dry_run:
        return
    read_only_guard(conn, what)
    if not yes and not interactive():
        fail(
            ExitCode.USAGE,
            f"refusing to {what} without confirmation: stdin is not a terminal",
            hint="pass --yes to confirm, or --dry-run to see what would happen",
        )


def ask_or_stop(question: str) -> None:
    """Ask on stderr, default No; anything but yes prints "nothing done" and exits 1."""
    if not typer.confirm(question, default=False, err=True):
        hint("nothing done")
        raise typer.Exit(int(ExitCode.FAILED))
