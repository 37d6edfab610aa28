"""One confirmation path for every mutation (run actions and interrupt decisions, one by
id or many by filter): a read-only context refuses, no terminal and no --yes refuses
(exit 2), and on a terminal the operator sees what will happen and answers a question
whose default is No."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import typer

from console.cli.exits import ExitCode, fail
from console.cli.output import hint
from console.cli.session import read_only_guard

if TYPE_CHECKING:
    import asyncio

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


async def ask_or_stop_while_connected(question: str) -> None:
    """:func:`ask_or_stop` while the command holds its gateway connection open (one
    connection and one snapshot from preview to send).

    The question is asked on a thread so that the event loop keeps running: the operator may
    take minutes, and the gateway pings every 20 s and drops a connection that stops
    answering (console/gateway/server.py). A daemon thread: ctrl-c cancels the command
    (asyncio.run turns it into KeyboardInterrupt, click prints "Aborted!", exit 1, as for a
    prompt on the main thread) without waiting for the operator's line. Questions are only
    asked on a terminal (``refuse_unconfirmable``), where ``input()`` reads through
    ``PyOS_Readline``, not through ``sys.stdin``'s buffer lock.
    """
    import asyncio
    import threading

    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    threading.Thread(
        target=_ask_on_thread, args=(question, loop, answered), name="irq-confirm", daemon=True
    ).start()
    await answered


def _ask_on_thread(
    question: str, loop: asyncio.AbstractEventLoop, answered: asyncio.Future[None]
) -> None:
    outcome: BaseException | None = None
    try:
        ask_or_stop(question)
    except BaseException as exc:  # noqa: BLE001 - typer.Exit (no), click.Abort (EOF): to the loop
        outcome = exc
    with contextlib.suppress(RuntimeError):  # the loop is gone (ctrl-c): nobody waits
        loop.call_soon_threadsafe(_settle, answered, outcome)


def _settle(answered: asyncio.Future[None], outcome: BaseException | None) -> None:
    if answered.done():
        return
    if outcome is None:
        answered.set_result(None)
    else:
        answered.set_exception(outcome)
