"""``irq runs``: the runs, with their state, heartbeat age, held resources and inbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.exits import ExitCode, fail
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
    fmt_progress,
    hint,
    make_table,
    print_table,
    styled,
    suggest,
)
from console.cli.session import bulk_json, connection_of, with_gateway
from console.leak_rule import leak_reason

if TYPE_CHECKING:
    from rich.table import Table

    from console.client import FleetView, GatewayClient


def _parse_states(values: list[str] | None) -> set[str]:
    if not values:
        return set()  # without importing the models (0.04 s of irq runs' start)
    from console.model import RunState

    known = {s.value for s in RunState}
    wanted: set[str] = set()
    for value in values or []:
        for part in value.split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part not in known:
                fail(
                    ExitCode.USAGE,
                    f"unknown state {part!r}; states are: " + ", ".join(s.value for s in RunState),
                )
            wanted.add(part)
    return wanted




def runs_command(
    ctx: typer.Context,
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state", "-s", help="Only runs in this state (repeatable, or comma-separated)."
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", "-b", help="Only runs of this backend (dbos, or dbos:local)."),
    ] = None,
    filter_: ListFilterOption = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            "-w",
            help="Keep the table current in place (a terminal), or emit one JSON line per "
            "change with -o jsonl; ctrl-c ends it.",
        ),
    ] = False,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """List runs with their state, heartbeat age, held resources and pending interrupts."""
    states = _parse_states(state)
    conn = connection_of(ctx, url, token, context)
    if watch:
        from console.cli.live_tables import TableSpec, watch_table

        watch_table(conn, TableSpec(
            kind="run", title="irq runs --watch", noun="runs",
            select=lambda v: select_runs(v, states, backend, filter_), table=runs_table,
        ), output)
        return

    async def fetch(client: GatewayClient) -> dict[str, Any]:
        # listed on the gateway: no snapshot of every run, no models of them here
        data: dict[str, Any] = await client.query(
            "runs", states=sorted(states) or None, backend=backend, expr=filter_)
        return data

    with bulk_json():
        listing = with_gateway(conn, fetch, snapshot=False)
        contracts: list[dict[str, Any]] = listing.get("runs", [])
        fields = listing.get("fields")
        if fields:  # the gateway sends cached contracts in its own order; printed in the
            contracts = [{k: c[k] for k in fields} for c in contracts]  # contract's

    _health_warnings(listing.get("backends", []))  # stderr, in every output format

    def text() -> None:
        if not contracts:
            hint("no runs" + (" match the filters" if states or backend or filter_ else ""))
            return
        print_table(runs_table(contracts))
        waiting = sum(len(c["interrupts"]) for c in contracts)
        next_steps = ["irq show RUN"]
        if waiting:
            next_steps.append("irq inbox")
        suggest(next_steps)

    emit(output, contracts, text, decoded_json=True)


def select_runs(
    view: FleetView, states: set[str], backend: str | None, expr: str | None = None
) -> list[dict[str, Any]]:
    """The contracts of the runs ``irq runs`` lists, by id."""
    from console.run_filter import listed_runs

    runs = listed_runs(view.runs.values(), states, backend, expr)
    return [r.contract() for r in runs]


def runs_table(contracts: list[dict[str, Any]]) -> Table:
    table = make_table("id", "name", "state", "heartbeat", "progress", "resources", "inbox")
    for c in contracts:
        held = [r for r in c["resources"] if r["state"] != "released"]
        resources = ", ".join(
            f"{r['kind']}" + ("!" if leak_reason(r["state"], c["state"]) else "") for r in held
        )
        state_text = _state_cell(c)
        if c.get("preempted"):
            state_text += " [dim](preempted)[/]"
        if c["warnings"]:
            state_text += f" [yellow]⚠{len(c['warnings'])}[/]"
        table.add_row(
            esc(c["id"]),
            esc(c["name"] or "-"),
            state_text,
            fmt_age(c["heartbeat_age_s"]),
            fmt_progress(c["progress"]),
            esc(resources or "-"),
            str(len(c["interrupts"])) if c["interrupts"] else "-",
        )
    return table


def _state_cell(c: dict[str, Any]) -> str:
    """The state as read, never a plain ``running`` once the heartbeat is past its limit:
    ``running?`` plus what the age suggests now and how old the reading is."""
    suspected = c.get("suspected_state")
    if not suspected:
        return styled(c["state"])
    seen = c.get("observed_age_s")
    read = f" read {fmt_age(seen)} ago" if seen is not None else ""
    return f"[bold yellow]{esc(c['state'])}?[/] [dim]({esc(suspected)}?{read})[/]"


def _health_warnings(backends: list[dict[str, Any]]) -> None:
    """Unreachable backends (their contracts, as the gateway sends them), on stderr."""
    for health in backends:
        if not health.get("reachable", True):
            hint(
                f"warning: backend {health.get('backend')}:{health.get('context')} is unreachable"
                + (f": {health['error']}" if health.get("error") else "")
                + " (its runs may be stale)"
            )


