"""``irq alerts`` (list), ``irq alerts ack ID --reason`` and ``irq alerts silence ID --for
DURATION --reason``.

An alert is a durable condition that needs a person although nothing is silent (DESIGN.md §1
"Alert"): raised once by the gateway after a grace period, cleared by itself when the
condition ends. Acknowledging (someone has it) and silencing (no bell, bar or notification
for a while) are mutations: they show the alert and ask (default No), ``--yes`` skips the
question, and without a terminal they refuse unless ``--yes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_models
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode, fail
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import (
    ContextOption,
    KeyOption,
    OutputOption,
    TokenOption,
    UrlOption,
    YesOption,
)
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    fmt_time,
    hint,
    make_table,
    print_table,
    stderr_console,
    suggest,
)
from console.cli.policy import print_policy_results
from console.cli.session import connection_of, expand_id, with_gateway

if TYPE_CHECKING:
    from console.alert_model import Alert
    from console.client import GatewayClient
    from console.model import CommandResult

STATE_STYLES = {"open": "bold red", "acknowledged": "yellow", "cleared": "dim"}

alerts_app = typer.Typer(
    cls=IrqGroup,
    help="Alerts: conditions that need a person (stalled, retrying, given up, no workers, "
    "liveness unknown, interrupt or obligation overdue, ...). Without a subcommand: list them.",
    invoke_without_command=True,
)

AlertArgument = Annotated[
    str,
    typer.Argument(help="Alert id (al-...) or an unambiguous prefix.", metavar="ID",
                   show_default=False),
]
ReasonOption = Annotated[
    str,
    typer.Option("--reason", help="Why (kept with the alert and audited).", show_default=False),
]


def _parse(data: Any) -> list[Alert]:
    from console.alert_model import Alert

    return answer_models(Alert, data, "to an alerts query")


def state_cell(alert: Alert) -> str:
    from console.model import utcnow

    style = STATE_STYLES.get(alert.state)
    text = f"[{style}]{esc(alert.state)}[/]" if style else esc(alert.state)
    if alert.silenced(utcnow()) and alert.silenced_until is not None:
        text += f" [dim](silenced to {fmt_time(alert.silenced_until.isoformat())})[/]"
    return text


@alerts_app.callback()
def alerts_command(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Cleared alerts too.")] = False,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """List the open and acknowledged alerts (--all: cleared ones too): kind, what it is
    about, since when, what is wrong and what to do."""
    if ctx.invoked_subcommand is not None:
        return
    conn = connection_of(ctx, url, token, context)

    async def fetch(client: GatewayClient) -> list[Alert]:
        return _parse(await client.query("alerts", include_cleared=all_ or None))

    alerts = with_gateway(conn, fetch)

    def text() -> None:
        if not alerts:
            hint("no alerts" if all_ else "no open alerts (--all: cleared ones too)")
            return
        table = make_table("id", "kind", "state", "about", "since", "detail", "action")
        for a in alerts:
            table.add_row(esc(a.id), esc(a.kind), state_cell(a),
                          esc(a.run or a.subject), fmt_time(a.since.isoformat()),
                          esc(a.detail), esc(a.action))
        print_table(table)
        first = next((a for a in alerts if a.state == "open"), None)
        if first is not None:
            suggest([f"irq alerts ack {first.id} --reason TEXT",
                     f"irq alerts silence {first.id} --for 2h --reason TEXT"])

    emit(output, [a.contract() for a in alerts], text)


async def _resolve(client: GatewayClient, query: str) -> tuple[str, Alert | None]:
    from console.ids import Candidate

    alerts = _parse(await client.query("alerts", include_cleared=True))
    alert_id = expand_id(query, [Candidate(a.id, ()) for a in alerts], noun="alert",
                         looks_complete=lambda v: v.startswith("al-") and len(v) == 15,
                         list_command="irq alerts --all")
    return alert_id, next((a for a in alerts if a.id == alert_id), None)


def _mutate(ctx: typer.Context, verb: str, action: str, query: str, *, reason: str,
            extra: dict[str, Any] | None, yes: bool, key: str | None, output: OutputFormat,
            url: str | None, token: str | None, context: str | None) -> None:
    if not reason.strip():
        fail(ExitCode.USAGE, "--reason must say why (it is kept with the alert and audited)")
    conn = connection_of(ctx, url, token, context)
    refuse_unconfirmable(conn, f"{verb} an alert", yes=yes, dry_run=False)
    alert_id, known = with_gateway(conn, lambda c: _resolve(c, query))
    if not yes:
        console = stderr_console()
        console.print(f"[bold]{esc(verb)}[/] {esc(alert_id)}")
        if known is not None:
            for label, value in (("kind", known.kind), ("about", known.run or known.subject),
                                 ("detail", known.detail), ("state", known.state)):
                console.print(f"  [dim]{label:<8}[/] {esc(value)}")
        if extra and extra.get("for_s"):
            console.print(f"  [dim]{'for':<8}[/] {extra['for_s']:g}s")
        console.print(f"  [dim]{'reason':<8}[/] {esc(reason)}")
        ask_or_stop(f"{verb} this alert?")

    async def send(client: GatewayClient) -> list[CommandResult]:
        return await client.named_command(action, [alert_id], reason=reason, key=key,
                                          extra=extra)

    results = with_gateway(conn, send)
    code = print_policy_results(results, output)
    if output is OutputFormat.TEXT:
        suggest(["irq alerts"] if code is ExitCode.OK else [f"irq audit --target {alert_id}"])
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


@alerts_app.command("ack", cls=IrqCommand)
def ack_command(
    ctx: typer.Context,
    alert: AlertArgument,
    reason: ReasonOption,
    yes: YesOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Acknowledge an open alert: someone has it (it stays until its condition ends)."""
    _mutate(ctx, "acknowledge", "alert_ack", alert, reason=reason, extra=None, yes=yes,
            key=key, output=output, url=url, token=token, context=context)


@alerts_app.command("silence", cls=IrqCommand)
def silence_command(
    ctx: typer.Context,
    alert: AlertArgument,
    reason: ReasonOption,
    for_: Annotated[str, typer.Option("--for", metavar="DURATION",
                                      help="How long (e.g. 30m, 2h, 1d).")] = "2h",
    yes: YesOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Silence an alert for a time: no bell, bar or notification, also if its condition
    comes back within it; it still clears by itself."""
    from console.durations import parse_duration

    try:
        seconds = parse_duration(for_).total_seconds()
    except ValueError as exc:
        fail(ExitCode.USAGE, f"--for: {exc}")
    _mutate(ctx, "silence", "alert_silence", alert, reason=reason, extra={"for_s": seconds},
            yes=yes, key=key, output=output, url=url, token=token, context=context)
