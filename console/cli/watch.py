"""``irq watch``: the gateway's events as JSON lines, resuming without gaps after a reconnect."""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.exits import fail_from_error
from console.cli.options import (
    ContextOption,
    TokenOption,
    UrlOption,
)
from console.cli.output import (
    dumps,
    hint,
)
from console.cli.session import connection_of

if TYPE_CHECKING:

    from console.client import ConnectionStatus, FleetView


def watch_command(
    ctx: typer.Context,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            "-k",
            help="Only events of this kind (run, interrupt, backend, audit, notice; repeatable).",
        ),
    ] = None,
    snapshot: Annotated[
        bool,
        typer.Option(
            "--snapshot/--no-snapshot",
            help="Print the full snapshot (runs, interrupts, backends) as the first line.",
        ),
    ] = False,
    retry: Annotated[
        bool,
        typer.Option("--retry", help="Keep retrying when the gateway is not reachable at start."),
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Stream events as JSON lines until interrupted; reconnects and resumes without gaps."""
    import asyncio

    from console.client import GatewayError, GatewayUnreachable, LiveSession, Unauthorized

    conn = connection_of(ctx, url, token, context)
    kinds = {k.strip() for value in kind or [] for k in value.split(",") if k.strip()}
    outcome: dict[str, Any] = {"error": None, "live": False}

    def write(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def on_update(view: FleetView, batch: list[dict[str, Any]]) -> None:
        for event in batch:
            if event.get("kind") == "snapshot":
                if kinds and "snapshot" not in kinds:
                    continue
                marker: dict[str, Any] = {
                    "kind": "snapshot",
                    "seq": view.seq,
                    "epoch": view.epoch,
                }
                if snapshot:
                    marker["data"] = {
                        "runs": [r.contract() for r in view.runs.values()],
                        "interrupts": [i.contract() for i in view.interrupts.values()],
                        "backends": [b.contract() for b in view.backends.values()],
                    }
                write(dumps(marker))
            elif not kinds or event.get("kind") in kinds:
                write(dumps(event))

    session: LiveSession

    def on_status(status: ConnectionStatus) -> None:
        if status.state == "live":
            if outcome["live"]:
                hint(f"irq: reconnected to {conn.url}")
            outcome["live"] = True
        elif status.state == "unauthorized":
            outcome["error"] = Unauthorized(status.detail or "the gateway refused the token")
            session.stop()
        elif status.state == "reconnecting" and status.detail:
            if not outcome["live"] and not retry:
                outcome["error"] = GatewayUnreachable(status.detail)
                session.stop()
            elif status.attempts in (1, 5) or status.attempts % 20 == 0:
                hint(f"irq: {status.detail}; reconnecting (attempt {status.attempts})")

    async def stream() -> None:
        nonlocal session
        session = LiveSession(
            conn.url, conn.token, client="irq-watch", on_update=on_update, on_status=on_status
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, session.stop)
        try:
            await session.run()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    try:
        asyncio.run(stream())
    except BrokenPipeError:
        # the reader went away (`irq watch | head`): that is a normal end
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return
    except GatewayError as exc:
        fail_from_error(exc)
    if outcome["error"] is not None:
        fail_from_error(outcome["error"])
