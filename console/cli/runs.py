"""Read-only commands: ``irq runs``, ``irq show``, ``irq inbox``, ``irq audit``, ``irq watch``."""

from __future__ import annotations

import os
import signal
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.completion import complete_run_ids
from console.cli.exits import ExitCode, fail, fail_from_error
from console.cli.options import (
    ContextOption,
    ExportOption,
    ListFilterOption,
    OutputOption,
    TokenOption,
    UrlOption,
)
from console.cli.output import (
    ExportFormat,
    OutputFormat,
    dumps,
    emit,
    esc,
    fmt_age,
    fmt_progress,
    fmt_time,
    hint,
    make_table,
    print_csv,
    print_table,
    print_text,
    styled,
    suggest,
)
from console.cli.session import connection_of, expand_run_id, with_gateway

if TYPE_CHECKING:
    from rich.table import Table

    from console.client import ConnectionStatus, FleetView, GatewayClient

# ------------------------------------------------------------------------------ irq runs


def _parse_states(values: list[str] | None) -> set[str]:
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

    listing = with_gateway(conn, fetch, snapshot=False)
    contracts: list[dict[str, Any]] = listing.get("runs", [])

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

    emit(output, contracts, text)


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
            f"{r['kind']}" + ("!" if r["state"] == "suspected_leak" else "") for r in held
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


def _state_row(data: dict[str, Any]) -> str:
    """``irq show``'s state line: the state, when it was read, and what the age says now."""
    state = str(data.get("state", ""))
    suspected = data.get("suspected_state")
    seen = data.get("observed_age_s")
    text = f"[bold yellow]{esc(state)}?[/]" if suspected else styled(state)
    if seen is not None:
        text += f" as of {fmt_age(seen)} ago"
    if suspected:
        age, timeout = data.get("heartbeat_age_s"), data.get("heartbeat_timeout_s")
        limit = f"past its {timeout:g}s timeout" if timeout and suspected == "lost" else (
            "past its cadence")
        text += (
            f" [yellow]— no heartbeat for {fmt_age(age)}, {limit}: {esc(suspected)}? "
            "(the backend has not said so yet)[/]"
        )
    if data.get("native_state"):
        text += f"  [dim](native: {esc(data.get('native_state'))})[/]"
    return text


def _health_warnings(backends: list[dict[str, Any]]) -> None:
    """Unreachable backends (their contracts, as the gateway sends them), on stderr."""
    for health in backends:
        if not health.get("reachable", True):
            hint(
                f"warning: backend {health.get('backend')}:{health.get('context')} is unreachable"
                + (f": {health['error']}" if health.get("error") else "")
                + " (its runs may be stale)"
            )


# ------------------------------------------------------------------------------ irq show


def show_command(
    ctx: typer.Context,
    run: Annotated[
        str,
        typer.Argument(
            help="Run id, native id, or an unambiguous prefix.",
            metavar="RUN",
            autocompletion=complete_run_ids,
        ),
    ],
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Show one run: state, resources, interrupts, journal steps, heartbeats, audit."""
    conn = connection_of(ctx, url, token, context)

    async def fetch(client: GatewayClient) -> dict[str, Any]:
        run_id = expand_run_id(client.view, run)
        data = await client.query("run", run_id=run_id)
        if not isinstance(data, dict):
            fail(ExitCode.FAILED, f"the gateway answered nonsense for run {run_id!r}")
        if not isinstance(data.get("interrupts_detail"), list):
            data["interrupts_detail"] = [
                i.contract() for i in client.view.interrupts.values() if i.run_id == run_id
            ]
        return data

    data = with_gateway(conn, fetch)
    emit(output, data, lambda: _render_run(data))


def _render_run(data: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [
        ("id", esc(data.get("id"))),
        ("name", esc(data.get("name") or "-")),
        ("state", _state_row(data)),
        (
            "heartbeat",
            fmt_age(data.get("heartbeat_age_s"))
            + (
                f" ago (timeout {data['heartbeat_timeout_s']:g}s)"
                if data.get("heartbeat_timeout_s")
                else ""
            ),
        ),
        ("progress", fmt_progress(data.get("progress"))),
        ("started", fmt_time(data.get("started_at"))),
        ("updated", fmt_time(data.get("updated_at"))),
    ]
    if data.get("preempted"):
        rows.append(("preempted", "yes: externally suspended, its intent stays valid"))
    if data.get("in_flight_step"):
        rows.append(("in flight", esc(data["in_flight_step"]) + " (at-least-once)"))
    if data.get("attempt") is not None:
        rows.append(("attempt", str(data["attempt"])))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print_text(f"[bold]{key.ljust(width)}[/]  {value}")
    warnings = data.get("warnings") or []
    if warnings:
        print_text()
        print_text("[bold]Recoverability warnings[/]")
    for warning in warnings:
        print_text(f"[yellow]⚠ {esc(warning)}[/]")

    resources = data.get("resources") or []
    print_text()
    print_text("[bold]Resources[/]" if resources else "[bold]Resources[/]  none reported")
    if resources:
        table = make_table("id", "kind", "state", "on pause", "on cancel")
        for r in resources:
            table.add_row(
                esc(r["id"]),
                esc(r["kind"]),
                esc(r["state"]),
                esc(r["on_pause"]),
                esc(r["on_cancel"]),
            )
        print_table(table)

    interrupts = data.get("interrupts_detail") or []
    pending_ids = data.get("interrupts") or []
    if interrupts or pending_ids:
        print_text()
        print_text("[bold]Interrupts[/]")
        table = make_table("id", "title", "status", "age")
        shown = set()
        for i in interrupts:
            shown.add(i["id"])
            table.add_row(esc(i["id"]), esc(i["title"]), styled(i["status"]), fmt_age(i["age_s"]))
        for iid in pending_ids:
            if iid not in shown:
                table.add_row(esc(iid), "-", styled("pending"), "-")
        print_table(table)

    journal = data.get("journal") or []
    print_text()
    print_text("[bold]Journal[/]" if journal else "[bold]Journal[/]  no steps recorded")
    if journal:
        table = make_table("#", "step", "status", "started", "completed")
        for step in journal:
            table.add_row(
                str(step.get("index", "")),
                esc(step.get("name")),
                esc(step.get("status")),
                fmt_time(step.get("started_at")),
                fmt_time(step.get("completed_at")),
            )
        print_table(table)

    heartbeats = data.get("heartbeats") or []
    if heartbeats:
        print_text()
        print_text("[bold]Recent heartbeats[/]")
        table = make_table("at", "seq", "progress", "details")
        for hb in heartbeats[-10:]:
            table.add_row(
                fmt_time(hb.get("at")),
                str(hb.get("seq", "")),
                fmt_progress(hb.get("progress")),
                esc(dumps(hb.get("details") or {})),
            )
        print_table(table)

    capabilities = data.get("capabilities")
    if isinstance(capabilities, dict) and isinstance(capabilities.get("actions"), dict):
        print_text()
        print_text(f"[bold]What the actions mean on {esc(capabilities.get('backend', '?'))}[/]")
        table = make_table("action", "meaning")
        for action, cap in capabilities["actions"].items():
            if not isinstance(cap, dict):
                continue
            meaning = esc(cap.get("meaning", ""))
            if not cap.get("native", True):
                meaning += " [dim](emulated)[/]"
            if not cap.get("supported"):
                meaning = "[dim](not supported)[/] " + meaning
            table.add_row(esc(action), meaning)
        print_table(table)

    audit = data.get("audit") or []
    if audit:
        print_text()
        print_text("[bold]Audit[/]")
        _audit_table(audit[-10:])

    for problem in data.get("errors") or []:
        hint(f"warning: {problem}")
    run_id = data.get("id", "RUN")
    state = data.get("state")
    steps: list[str] = []
    if pending_ids:
        steps.append("irq inbox")
    if state == "paused":
        steps.append(f"irq resume {run_id}")
    elif state in ("running", "late", "lost", "waiting", "backing_off"):
        steps.append(f"irq pause {run_id} --dry-run")
    suggest(steps)


# ------------------------------------------------------------------------------ irq inbox


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
                steps.append(f"irq respond {first['id']} --text TEXT")
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
    table = make_table("id", "title", "action", "age", "decisions", "status")
    for c in contracts:
        table.add_row(
            esc(c["id"]),
            esc(c["title"]),
            esc(c["action"] or "-"),
            fmt_age(c["age_s"]),
            esc(",".join(c["allowed_decisions"])),
            styled(c["status"]),
        )
    return table


# ------------------------------------------------------------------------------ irq audit


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
        data = await client.query("audit", limit=wanted, target_prefix=prefix, identity=actor,
                                  actions=actions or None, **window)
        if not isinstance(data, list):
            fail(ExitCode.FAILED, "the gateway answered nonsense to an audit query")
        return [e for e in data if isinstance(e, dict)]

    entries = with_gateway(conn, fetch)
    if len(entries) >= wanted:
        hint(f"note: showing the newest {wanted} entries; there may be more (raise --limit "
             "or narrow --since/--until)")

    def text() -> None:
        if not entries:
            filtered = target or window or actor or actions
            hint("no audit entries" + (" match the filters" if filtered else ""))
            return
        _audit_table(entries)

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


def _audit_table(entries: list[dict[str, Any]]) -> None:
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


# ------------------------------------------------------------------------------ irq watch


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
