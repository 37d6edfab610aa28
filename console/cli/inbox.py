"""``irq inbox``: the interrupts waiting for a human decision, oldest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.completion import complete_run_ids
from console.cli.decision_preview import decision_input
from console.cli.options import (
    ContextOption,
    ListFilterOption,
    OutputOption,
    TokenOption,
    UrlOption,
)
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    fmt_age,
    hint,
    make_table,
    print_table,
    styled,
    suggest,
)
from console.cli.session import connection_of, expand_run_id, with_gateway

if TYPE_CHECKING:
    from rich.table import Table

    from console.client import FleetView, GatewayClient


def inbox_command(
    ctx: typer.Context,
    run: Annotated[
        str | None,
        typer.Option("--run", help="Only interrupts of this run.", autocompletion=complete_run_ids),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Include decided and withdrawn interrupts.")
    ] = False,
    filter_: ListFilterOption = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            "-w",
            help="Keep the inbox current in place (a terminal), or emit one JSON line per "
            "change with -o jsonl; ctrl-c ends it.",
        ),
    ] = False,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """List interrupts waiting for a human decision, oldest first."""
    conn = connection_of(ctx, url, token, context)
    if watch:
        from console.cli.live_tables import TableSpec, watch_table

        run_id: str | None = None
        if run:
            async def resolve(client: GatewayClient) -> str:
                return expand_run_id(client.view, run)

            run_id = with_gateway(conn, resolve)
        watch_table(conn, TableSpec(
            kind="interrupt", title="irq inbox --watch", noun="interrupts",
            select=lambda v: select_interrupts(v, show_all, run_id, filter_), table=inbox_table,
        ), output)
        return

    async def fetch(client: GatewayClient) -> list[dict[str, Any]]:
        return select_interrupts(
            client.view, show_all, expand_run_id(client.view, run) if run else None, filter_)

    contracts = with_gateway(conn, fetch)

    def text() -> None:
        if not contracts:
            hint("inbox is empty: no interrupt is waiting for a decision")
            return
        print_table(inbox_table(contracts))
        first = next((c for c in contracts if c["status"] == "pending"), None)
        if first is not None:
            allowed = first["allowed_decisions"]
            steps = []
            if "approve" in allowed:
                steps.append(f"irq approve {first['id']}")
            if "edit" in allowed:
                steps.append(f"irq edit {first['id']} --args '{{...}}'")
            if "reject" in allowed:
                steps.append(f"irq reject {first['id']} --feedback TEXT")
            if "respond" in allowed:
                steps.append(f"irq respond {first['id']}{decision_input('respond', first)}")
            suggest(steps)

    emit(output, contracts, text)


def select_interrupts(
    view: FleetView, show_all: bool, run_id: str | None, expr: str | None = None
) -> list[dict[str, Any]]:
    """The contracts of the interrupts ``irq inbox`` lists, oldest first."""
    if show_all:
        items = sorted(view.interrupts.values(), key=lambda i: i.created_at)
    else:
        items = view.pending_interrupts()
    if run_id:
        items = [i for i in items if i.run_id == run_id]
    if expr:
        from console.model import utcnow
        from console.run_filter import FilterQuery

        query, now = FilterQuery.parse(expr), utcnow()
        items = [i for i in items if query.matches_interrupt(i, view.runs.get(i.run_id), now=now)]
    return [i.contract() for i in items]


def inbox_table(contracts: list[dict[str, Any]]) -> Table:
    table = make_table("id", "kind", "title", "action", "age", "decisions", "status")
    for c in contracts:
        table.add_row(
            esc(c["id"]),
            esc(c.get("kind") or "helper"),
            esc(c["title"]),
            esc(c["action"] or "-"),
            fmt_age(c["age_s"]),
            esc(",".join(c["allowed_decisions"])),
            styled(c["status"]),
        )
    return table


