"""``irq audit``: who did what to which target, why, and what happened."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_list
from console.cli.exits import ExitCode, fail
from console.cli.options import (
    ContextOption,
    ExportOption,
    TokenOption,
    UrlOption,
)
from console.cli.output import (
    ExportFormat,
    OutputFormat,
    emit,
    esc,
    fmt_time,
    hint,
    make_table,
    print_csv,
    print_table,
    styled,
)
from console.cli.session import connection_of, with_gateway

if TYPE_CHECKING:

    from console.client import FleetView, GatewayClient


AUDIT_CSV_FIELDS = ("at", "identity", "role", "action", "target", "reason", "outcome")
AUDIT_WINDOW_LIMIT = 10_000  # default --limit when --since/--until bound the window


def audit_command(
    ctx: typer.Context,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=1,
            max=10_000,
            help="At most this many entries, newest first (default 50; 10000 with "
            "--since/--until).",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option("--target", "-t", help="Only entries whose target is (or starts with) this."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only entries at or after this: a duration back from now (2h, 30m, 1d) or an "
            "ISO time (2026-12-01T20:00; UTC without an offset).",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", help="Only entries before this (same forms as --since).",
            show_default=False,
        ),
    ] = None,
    actor: Annotated[
        str | None,
        typer.Option("--actor", help="Only entries of this identity (the token's name).",
                     show_default=False),
    ] = None,
    action: Annotated[
        list[str] | None,
        typer.Option(
            "--action",
            help="Only these actions (pause, cancel, approve, …; repeatable or comma-separated).",
            show_default=False,
        ),
    ] = None,
    output: ExportOption = ExportFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """The audit trail: who did what to which target, why, and what happened, newest first.
    The gateway's audit query applies every filter; -o csv writes a header and the fields at,
    identity, role, action, target, reason, outcome."""
    from console.durations import parse_when

    conn = connection_of(ctx, url, token, context)
    bounds: dict[str, datetime] = {}
    for flag, value in (("since", since), ("until", until)):
        if value is not None:
            try:
                bounds[flag] = parse_when(value)
            except ValueError as exc:
                fail(ExitCode.USAGE, f"--{flag}: {exc}")
    if "since" in bounds and "until" in bounds and bounds["since"] >= bounds["until"]:
        fail(ExitCode.USAGE, "--since must be before --until")
    window = {flag: when.isoformat() for flag, when in bounds.items()}
    actions = sorted({a.strip() for v in action or [] for a in v.split(",") if a.strip()})
    wanted = limit or (AUDIT_WINDOW_LIMIT if window else 50)

    async def fetch(client: GatewayClient) -> list[dict[str, Any]]:
        prefix = target
        if target:
            prefix = _expand_target(client.view, target)
        return answer_list(await client.query(
            "audit", limit=wanted, target_prefix=prefix, identity=actor,
            actions=actions or None, **window), "to an audit query")

    entries = with_gateway(conn, fetch)
    if len(entries) >= wanted:
        hint(f"note: showing the newest {wanted} entries; there may be more (raise --limit "
             "or narrow --since/--until)")

    def text() -> None:
        if not entries:
            filtered = target or window or actor or actions
            hint("no audit entries" + (" match the filters" if filtered else ""))
            return
        audit_table(entries)

    if output is ExportFormat.CSV:
        print_csv(entries, AUDIT_CSV_FIELDS)
        return
    emit(OutputFormat(output.value), entries, text)


def _expand_target(view: FleetView, target: str) -> str:
    """A run or interrupt the query names unambiguously, else the query as a prefix."""
    runs = [r.id for r in view.runs.values() if r.id == target or r.native_id == target]
    intrs = [i.id for i in view.interrupts.values() if i.id == target or i.native_id == target]
    found = sorted(set(runs + intrs))
    if len(found) == 1:
        return found[0]
    suffix = sorted({r.id for r in view.runs.values() if r.id.endswith(target)})
    if len(suffix) == 1 and not any(r.startswith(target) for r in view.runs):
        return suffix[0]
    return target


def audit_table(entries: list[dict[str, Any]]) -> None:
    table = make_table("at", "identity", "role", "action", "target", "outcome", "reason")
    for e in entries:
        table.add_row(
            fmt_time(e.get("at")),
            esc(e.get("identity")),
            esc(e.get("role")),
            esc(e.get("action")),
            esc(e.get("target")),
            styled(str(e.get("outcome", ""))),
            esc(e.get("reason") or "-"),
        )
    print_table(table)


