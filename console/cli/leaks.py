"""``irq leaks``: resources irq believes should be free but are still reported held (held by
ended runs, or no release report after a pause or cancel), with kind, age and cost (when a
price is known). The rule is console/leak_conditions.py, asked on the gateway's snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from console.cli.options import ContextOption, OutputOption, TokenOption, UrlOption
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    fmt_age,
    hint,
    make_table,
    print_table,
    suggest,
)
from console.cli.session import connection_of, with_gateway

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.model import Run

REASON_TEXT = {"run_ended": "run ended, still held",
               "no_release_report": "no release report"}


def leaks_command(
    ctx: typer.Context,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """List resources that should be free but are still reported held: by runs that ended,
    or with no release report after a pause or cancel."""
    from console.leak_conditions import leaks
    from console.model import utcnow

    conn = connection_of(ctx, url, token, context)

    async def fetch(client: GatewayClient) -> list[Run]:
        return list(client.view.runs.values())

    now = utcnow()
    found = leaks(with_gateway(conn, fetch), now)
    contracts = [leak.contract(now) for leak in found]

    def text() -> None:
        if not found:
            hint("no leaked resources")
            return
        table = make_table("run", "resource", "kind", "why", "age", "cost")
        for leak in found:
            age = leak.age_s(now)
            table.add_row(esc(leak.run_id), esc(leak.resource_id), esc(leak.kind),
                          REASON_TEXT.get(leak.reason, leak.reason),
                          fmt_age(age) if age is not None else "-",
                          f"{leak.cost:g}" if leak.cost is not None else "-")
        print_table(table)
        suggest([f"irq release {found[0].run_id} {found[0].resource_id} --force"])

    emit(output, contracts, text)
