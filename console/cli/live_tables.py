"""``irq runs --watch`` and ``irq inbox --watch``: a table kept current from the live
subscription (console/client.py ``LiveSession``: reconnects and resumes by itself).

- ``-o text`` on a terminal: the same table as without ``--watch``, redrawn in place (rich
  Live) at most ``PAINTS_PER_S`` times a second and at least once a second (ages move), under a
  header line with the gateway, the connection state and the count.
- ``-o jsonl``: one line per change, ``{"change": "upsert"|"remove", "kind": "run"|"interrupt",
  "data": {...}}`` (``data`` is the contract; a removal carries ``{"id": ...}``), first one
  upsert per item already there. An item is upserted when anything but its age fields
  changed; it is removed when it leaves the listing (gone, or no longer matching the filters,
  e.g. an interrupt once decided without ``--all``).
- ``-o text`` when stdout is not a terminal, and ``-o json``: refused (exit 2) with a hint to
  use ``-o jsonl``; a redrawn table is not something a pipe can read.

ctrl-c (or SIGTERM) ends it with exit 0; a refused token exits 5, a gateway unreachable at
start exits 6 (later outages are shown in the header while it reconnects).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from console.cli.exits import ExitCode, fail, fail_from_error
from console.cli.output import OutputFormat, dumps, esc, hint, stdout_console

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

    from console.client import ConnectionStatus, FleetView
    from console.config import Connection

PAINTS_PER_S = 4.0
#: fields that move with the clock, not with the item: never a change on their own
VOLATILE_FIELDS = frozenset({"heartbeat_age_s", "observed_age_s", "age_s"})


@dataclass
class TableSpec:
    """What one live table lists and how it draws it (the non-watch command's functions)."""

    kind: Literal["run", "interrupt"]
    title: str
    noun: str
    select: Callable[[FleetView], list[dict[str, Any]]]
    table: Callable[[list[dict[str, Any]]], Table]


@dataclass
class ChangeFeed:
    """The JSON-lines changes between what was last emitted and the current listing."""

    kind: str
    shown: dict[str, str] = field(default_factory=dict)  # id -> signature last emitted

    def changes(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        current = {str(c["id"]): c for c in items}
        for item_id in [i for i in self.shown if i not in current]:
            del self.shown[item_id]
            out.append({"change": "remove", "kind": self.kind, "data": {"id": item_id}})
        for item_id, contract in current.items():
            signature = dumps({k: v for k, v in contract.items() if k not in VOLATILE_FIELDS})
            if self.shown.get(item_id) != signature:
                self.shown[item_id] = signature
                out.append({"change": "upsert", "kind": self.kind, "data": contract})
        return out


def header_line(spec: TableSpec, url: str, status: ConnectionStatus, count: int,
                updated: datetime | None, now: datetime | None = None) -> str:
    """``irq runs --watch · ws://… · live · 3 runs · 22:01:05`` (rich markup)."""
    clock = (now or datetime.now().astimezone()).strftime("%H:%M:%S")
    if status.state == "live":
        state = "[green]● live[/]"
    elif status.state == "connecting":
        state = "[cyan]connecting…[/]"
    elif status.state == "unauthorized":
        state = f"[bold red]refused: {esc(status.detail)}[/]"
    else:
        detail = f": {esc(status.detail)}" if status.detail else ""
        as_of = (f" (table as of {updated.astimezone().strftime('%H:%M:%S')})"
                 if updated else "")
        state = f"[yellow]reconnecting, attempt {status.attempts}{detail}[/]{as_of}"
    return (f"[bold]{esc(spec.title)}[/] · {esc(url)} · {state} · {count} {spec.noun} · "
            f"{clock} [dim](ctrl-c quits)[/]")


def render_screen(spec: TableSpec, view: FleetView, url: str,
                  status: ConnectionStatus) -> RenderableType:
    """The header line and the table (or a line saying it is empty)."""
    from rich.console import Group
    from rich.text import Text

    items = spec.select(view)
    lines: list[RenderableType] = [
        Text.from_markup(header_line(spec, url, status, len(items), view.received_at))]
    for health in sorted(view.backends.values(), key=lambda h: h.key):
        if not health.reachable:  # the same warning the non-watch command prints
            lines.append(Text.from_markup(
                f"[yellow]backend {esc(health.key)} is unreachable"
                + (f": {esc(health.error)}" if health.error else "")
                + " (its rows may be stale)[/]"))
    lines.append(Text(""))
    if not items:
        waiting = status.state != "live" and view.received_at is None
        lines.append(Text("waiting for the gateway…" if waiting else f"no {spec.noun}",
                          style="dim"))
    else:
        lines.append(spec.table(items))
    return Group(*lines)


def watch_table(conn: Connection, spec: TableSpec, output: OutputFormat) -> None:
    """Run the live table until ctrl-c; see the module docstring for the output rules."""
    import asyncio

    if output is OutputFormat.JSON:
        fail(ExitCode.USAGE, "--watch does not end, so it has no single JSON document",
             hint="use -o jsonl for one JSON line per change")
    if output is OutputFormat.TEXT and not sys.stdout.isatty():
        fail(ExitCode.USAGE, "--watch redraws a table in place and needs a terminal; "
             "stdout is not one", hint="use -o jsonl for one JSON line per change")
    from console.client import (
        ConnectionStatus,
        GatewayError,
        GatewayUnreachable,
        LiveSession,
        Unauthorized,
    )

    status: list[ConnectionStatus] = [ConnectionStatus("connecting")]
    outcome: dict[str, Any] = {"error": None, "live": False, "dirty": True}
    feed = ChangeFeed(spec.kind)
    session: LiveSession

    def on_update(view: FleetView, batch: list[dict[str, Any]]) -> None:
        if output is OutputFormat.JSONL:
            lines = [dumps(change) for change in feed.changes(spec.select(view))]
            if lines:
                sys.stdout.write("\n".join(lines) + "\n")
                sys.stdout.flush()
        outcome["dirty"] = True

    def on_status(new: ConnectionStatus) -> None:
        failed = new.state == "reconnecting" and bool(new.detail)  # an attempt just failed
        if new.state == "reconnecting" and not new.detail and status[0].state == "reconnecting":
            new.detail = status[0].detail  # keep saying why while it retries
        status[0] = new
        outcome["dirty"] = True
        if new.state == "live":
            if outcome["live"] and output is OutputFormat.JSONL:
                hint(f"irq: reconnected to {conn.url}")  # the terminal table's header says it
            outcome["live"] = True
        elif (failed and outcome["live"]
              and output is OutputFormat.JSONL
              and (new.attempts in (1, 5) or new.attempts % 20 == 0)):
            hint(f"irq: {new.detail}; reconnecting (attempt {new.attempts})")
        elif new.state == "unauthorized":
            outcome["error"] = Unauthorized(new.detail or "the gateway refused the token")
            session.stop()
        elif failed and not outcome["live"]:
            outcome["error"] = GatewayUnreachable(new.detail)
            session.stop()

    async def paint(live: Any) -> None:
        last = 0.0
        while True:
            now = time.monotonic()
            if outcome["dirty"] or now - last >= 1.0:
                outcome["dirty"] = False
                last = now
                live.update(render_screen(spec, session.view, conn.url, status[0]), refresh=True)
            await asyncio.sleep(1 / PAINTS_PER_S)

    async def stream() -> None:
        nonlocal session
        session = LiveSession(conn.url, conn.token, client="irq-watch-table",
                              on_update=on_update, on_status=on_status)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, session.stop)
        try:
            if output is OutputFormat.JSONL:
                await session.run()
                return
            from rich.live import Live

            with Live(console=stdout_console(), auto_refresh=False,
                      redirect_stdout=False, redirect_stderr=False) as live:
                painter = asyncio.create_task(paint(live))
                try:
                    await session.run()
                finally:
                    painter.cancel()
                    if outcome["error"] is None:  # the last state stays on the screen
                        live.update(render_screen(spec, session.view, conn.url, status[0]),
                                    refresh=True)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    try:
        asyncio.run(stream())
    except BrokenPipeError:  # the reader went away (`irq runs --watch -o jsonl | head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return
    except GatewayError as exc:
        fail_from_error(exc)
    if outcome["error"] is not None:
        fail_from_error(outcome["error"])
