"""``irq show RUN``: one run in full -- state, resources, interrupts, journal steps,
heartbeats, what the actions mean on its backend, its audit trail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_dict
from console.cli.completion import complete_run_ids
from console.cli.options import (
    ContextOption,
    OutputOption,
    TokenOption,
    UrlOption,
)
from console.cli.output import (
    OutputFormat,
    dumps,
    emit,
    esc,
    fmt_age,
    fmt_progress,
    fmt_time,
    hint,
    make_table,
    print_table,
    print_text,
    styled,
    suggest,
)
from console.cli.session import connection_of, expand_run_id, with_gateway

if TYPE_CHECKING:

    from console.client import GatewayClient
from console.cli.audit import audit_table


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
        data = answer_dict(await client.query("run", run_id=run_id), f"for run {run_id!r}")
        if not isinstance(data.get("interrupts_detail"), list):
            data["interrupts_detail"] = [
                i.contract() for i in client.view.interrupts.values() if i.run_id == run_id
            ]
        return data

    data = with_gateway(conn, fetch)
    emit(output, data, lambda: _render_run(data))


def _render_run(data: dict[str, Any]) -> None:
    """``irq show`` as text: the summary, then one section per part of the run's contract
    (a section with nothing to say is left out, or says so)."""
    _print_summary(data)
    _print_resources(data.get("resources") or [])
    _print_interrupts(data.get("interrupts_detail") or [], data.get("interrupts") or [])
    _print_journal(data.get("journal") or [])
    _print_heartbeats(data.get("heartbeats") or [])
    _print_capabilities(data.get("capabilities"))
    audit = data.get("audit") or []
    if audit:
        print_text()
        print_text("[bold]Audit[/]")
        audit_table(audit[-10:])
    for problem in data.get("errors") or []:
        hint(f"warning: {problem}")
    _suggest_next(data)


def _print_summary(data: dict[str, Any]) -> None:
    """Id, name, state, heartbeat, progress, times; then the recoverability warnings."""
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
    error = data.get("error")
    if isinstance(error, dict) and (error.get("type") or error.get("message")):
        where = f" in step {esc(error['step'])}" if error.get("step") else ""
        failure = f"[red]{esc(error.get('type') or 'error')}{where}:[/] {esc(error.get('message'))}"
        rows.insert(3, ("error", failure))
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


def _print_resources(resources: list[dict[str, Any]]) -> None:
    print_text()
    print_text("[bold]Resources[/]" if resources else "[bold]Resources[/]  none reported")
    if not resources:
        return
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


def _print_interrupts(interrupts: list[dict[str, Any]], pending_ids: list[str]) -> None:
    """The run's interrupts in detail, and any pending id the detail does not cover."""
    if not (interrupts or pending_ids):
        return
    print_text()
    print_text("[bold]Interrupts[/]")
    table = make_table("id", "kind", "title", "status", "age", "deadline")
    shown = set()
    for i in interrupts:
        shown.add(i["id"])
        table.add_row(
            esc(i["id"]),
            esc(i.get("kind") or "helper"),
            esc(i["title"]),
            styled(i["status"]),
            fmt_age(i["age_s"]),
            fmt_time(i.get("deadline_at")),
        )
    for iid in pending_ids:
        if iid not in shown:
            table.add_row(esc(iid), "-", "-", styled("pending"), "-", "-")
    print_table(table)
    for i in interrupts:
        _print_native_wait(i)


def _print_native_wait(intr: dict[str, Any]) -> None:
    """Where a native wait waits, who answers it, and each call of a batched interrupt."""
    site, handlers, calls = intr.get("wait_site"), intr.get("handlers"), intr.get("actions")
    if not (site or handlers or calls):
        return
    print_text(f"  [bold]{esc(intr['id'])}[/]")
    if site:
        print_text(f"    waits at: {esc(site)}")
    for h in handlers or []:
        about = f" - {esc(h.get('description'))}" if h.get("description") else ""
        schema = " [dim](schema published)[/]" if h.get("args_schema") else ""
        name = f"{esc(h.get('kind'))} [bold]{esc(h.get('name'))}[/]"
        print_text(f"    answer with {name}{about}{schema}")
    for n, call in enumerate(calls or [], 1):
        allowed = ",".join(call.get("allowed_decisions") or [])
        print_text(
            f"    call {n}: {esc(call.get('action'))}({esc(dumps(call.get('args') or {}))}) "
            f"[dim]{esc(allowed)}[/]"
        )


def _print_journal(journal: list[dict[str, Any]]) -> None:
    print_text()
    print_text("[bold]Journal[/]" if journal else "[bold]Journal[/]  no steps recorded")
    if not journal:
        return
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


def _print_heartbeats(heartbeats: list[dict[str, Any]]) -> None:
    if not heartbeats:
        return
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


def _print_capabilities(capabilities: Any) -> None:
    """What pause, cancel, ... mean on the run's backend (native or emulated, supported)."""
    if not (isinstance(capabilities, dict) and isinstance(capabilities.get("actions"), dict)):
        return
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


def _suggest_next(data: dict[str, Any]) -> None:
    run_id = data.get("id", "RUN")
    state = data.get("state")
    steps: list[str] = []
    if data.get("interrupts"):
        steps.append("irq inbox")
    if state == "paused":
        steps.append(f"irq resume {run_id}")
    elif state in ("running", "late", "lost", "waiting", "backing_off"):
        steps.append(f"irq pause {run_id} --dry-run")
    suggest(steps)


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


