"""``irq obligations`` and ``irq obligation fulfil|waive ID --note TEXT``.

An obligation is what a policy's ``oblige`` rule asks for after a tool call ("notify the
CISO within 10 minutes"); the gateway tracks it from open to fulfilled, overdue or waived.
Fulfilling or waiving one by hand is a mutation: it shows the obligation and asks (default
No), ``--yes`` skips the question, and without a terminal it refuses unless ``--yes``.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_models
from console.cli.completion import complete_open_obligation_ids, complete_run_ids
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode, fail
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import (
    ContextOption,
    DryRunOption,
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
    fmt_age,
    fmt_time,
    hint,
    make_table,
    print_table,
    stderr_console,
    stdout_console,
    suggest,
)
from console.cli.policy import print_policy_results
from console.cli.session import connection_of, expand_id, expand_run_id, with_gateway

if TYPE_CHECKING:
    from rich.console import Console

    from console.client import GatewayClient
    from console.ids import Candidate
    from console.model import CommandResult
    from console.policy.model import Obligation


class ObligationStateChoice(StrEnum):
    OPEN = "open"
    OVERDUE = "overdue"
    FULFILLED = "fulfilled"
    WAIVED = "waived"


STATE_STYLES = {"open": "cyan", "overdue": "bold red", "fulfilled": "green", "waived": "dim"}
#: states an operator may still fulfil or waive
SETTLEABLE = ("open", "overdue")


def state_cell(state: str) -> str:
    style = STATE_STYLES.get(state)
    return f"[{style}]{esc(state)}[/]" if style else esc(state)


def due_cell(obligation: Obligation, now: datetime) -> str:
    """``in 4m10s`` while open, ``overdue by 1m02s`` once past, ``-`` when settled or
    without a deadline."""
    if obligation.due_at is None or obligation.state not in SETTLEABLE:
        return "-"
    left = (obligation.due_at - now).total_seconds()
    if left > 0 and obligation.state == "open":
        return f"in {fmt_age(left)}"
    return f"[red]overdue by {fmt_age(max(0.0, -left))}[/]"


def by_cell(obligation: Obligation) -> str:
    if not obligation.by:
        return "-"
    text = esc(obligation.by)
    if obligation.note:
        text += f" [dim]({esc(obligation.note)})[/]"
    return text


def _parse(data: Any) -> list[Obligation]:
    from console.policy.model import Obligation

    return answer_models(Obligation, data, "to an obligations query")


def obligations_command(
    ctx: typer.Context,
    state: Annotated[
        ObligationStateChoice | None,
        typer.Option("--state", "-s", help="Only obligations in this state.", case_sensitive=False),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="RUN",
            help="Only obligations of this run.",
            autocompletion=complete_run_ids,
        ),
    ] = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """List the obligations policy rules opened after tool calls: what, for which run, due
    in or overdue by, and who fulfilled or which dispensation waived them."""
    from console.model import utcnow

    conn = connection_of(ctx, url, token, context)

    async def fetch(client: GatewayClient) -> list[Obligation]:
        run_id = expand_run_id(client.view, run) if run else None
        wanted = state.value if state is not None else None
        return _parse(await client.query("obligations", state=wanted, run_id=run_id))

    obligations = with_gateway(conn, fetch)
    contracts = [o.model_dump(mode="json") for o in obligations]

    def text() -> None:
        if not obligations:
            filtered = state is not None or run is not None
            hint("no obligations" + (" match the filters" if filtered else ""))
            return
        now = utcnow()
        table = make_table("id", "state", "what", "run", "due", "by")
        for o in obligations:
            table.add_row(
                esc(o.id),
                state_cell(o.state),
                esc(o.what),
                esc(o.run_id),
                due_cell(o, now),
                by_cell(o),
            )
        print_table(table)
        first = next((o for o in obligations if o.state in SETTLEABLE), None)
        if first is not None:
            suggest([f"irq obligation fulfil {first.id} --note TEXT"])

    emit(output, contracts, text)


# ---------------------------------------------------------------- irq obligation fulfil|waive

obligation_app = typer.Typer(
    cls=IrqGroup,
    help="Settle one obligation by hand: fulfil it (it was done) or waive it (it need not be), "
    "with a note for the audit trail.",
    no_args_is_help=True,
)

ObligationArgument = Annotated[
    str,
    typer.Argument(
        help="Obligation id (RUN_ID#CALL/RULE), RUN_NATIVE#CALL/RULE, or an unambiguous prefix.",
        metavar="ID",
        show_default=False,
        autocompletion=complete_open_obligation_ids,
    ),
]
NoteOption = Annotated[
    str,
    typer.Option(
        "--note",
        help="What was done, or why it need not be (recorded with the obligation and audited).",
        show_default=False,
    ),
]


def obligation_candidates(obligations: list[Obligation]) -> list[Candidate]:
    """Each obligation by its id and by its alias."""
    from console.ids import Candidate, obligation_alias

    out = []
    for o in obligations:
        alias = obligation_alias(o.id)
        out.append(Candidate(o.id, (alias,) if alias else ()))
    return out


def _obligation_id_like(value: str) -> bool:
    from console.model import split_run_id

    run_id, sep, rest = value.partition("#")
    if not sep or "/" not in rest:
        return False
    try:
        split_run_id(run_id)
    except ValueError:
        return False
    return True


async def resolve_obligation(client: GatewayClient, query: str) -> tuple[str, Obligation | None]:
    """The obligation ``query`` names (strict: exact id, exact alias, unique prefix) and what
    the gateway knows of it; a complete id the gateway does not list passes through."""
    obligations = _parse(await client.query("obligations"))
    obligation_id = expand_id(
        query,
        obligation_candidates(obligations),
        noun="obligation",
        looks_complete=_obligation_id_like,
        list_command="irq obligations",
    )
    known = next((o for o in obligations if o.id == obligation_id), None)
    return obligation_id, known


def render_settlement(
    verb: str, obligation_id: str, known: Obligation | None, note: str, console: Console
) -> None:
    from console.model import utcnow

    console.print(f"[bold]{esc(verb)}[/] {esc(obligation_id)}")

    def row(label: str, value: str) -> None:
        console.print(f"  [dim]{label:<8}[/] {value}")

    if known is None:
        row("state", "[yellow]not listed by the gateway[/]")
    else:
        row("what", esc(known.what))
        row("rule", esc(known.rule))
        row("run", esc(known.run_id))
        row("state", state_cell(known.state))
        row("created", fmt_time(known.created_at.isoformat()))
        if known.due_at is not None:
            row("due", f"{fmt_time(known.due_at.isoformat())}  {due_cell(known, utcnow())}")
    row("note", esc(note))


def settle(
    ctx: typer.Context,
    verb: str,
    query: str,
    *,
    note: str,
    yes: bool,
    dry_run: bool,
    key: str | None,
    output: OutputFormat,
    url: str | None,
    token: str | None,
    context: str | None,
) -> None:
    """Fulfil or waive one obligation (commands ``obligation_fulfil`` / ``obligation_waive``;
    the note is the command's reason)."""
    if not note.strip():
        fail(ExitCode.USAGE, "--note must say what was done, or why it need not be")
    conn = connection_of(ctx, url, token, context)
    refuse_unconfirmable(conn, f"{verb} an obligation", yes=yes, dry_run=dry_run)
    action = f"obligation_{verb}"

    async def send(client: GatewayClient, obligation_id: str) -> list[CommandResult]:
        return await client.named_command(action, [obligation_id], reason=note, key=key)

    if yes and not dry_run:

        async def resolve_and_send(client: GatewayClient) -> tuple[str, list[CommandResult]]:
            obligation_id, _ = await resolve_obligation(client, query)
            return obligation_id, await send(client, obligation_id)

        obligation_id, results = with_gateway(conn, resolve_and_send)
    else:
        obligation_id, known = with_gateway(conn, lambda c: resolve_obligation(c, query))
        if dry_run:
            preview = {
                "action": action,
                "target": obligation_id,
                "note": note,
                "obligation": known.model_dump(mode="json") if known else None,
            }
            emit(
                output,
                preview,
                lambda: render_settlement(verb, obligation_id, known, note, stdout_console()),
            )
            if output is OutputFormat.TEXT:
                suggest([f"irq obligation {verb} {obligation_id} --note TEXT"])
            return
        if known is not None and known.state not in SETTLEABLE:
            settled_by = f" by {known.by}" if known.by else ""
            fail(
                ExitCode.CONFLICT,
                f"{obligation_id} is already {known.state}{settled_by}",
                hint=f"irq audit --target {obligation_id}",
            )
        render_settlement(verb, obligation_id, known, note, stderr_console())
        ask_or_stop(f"{verb} this obligation?")

        async def send_resolved(client: GatewayClient) -> list[CommandResult]:
            return await send(client, obligation_id)

        results = with_gateway(conn, send_resolved)

    code = print_policy_results(results, output)
    if output is OutputFormat.TEXT:
        ok = code is ExitCode.OK
        suggest(["irq obligations"] if ok else [f"irq audit --target {obligation_id}"])
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


@obligation_app.command("fulfil", cls=IrqCommand)
def fulfil_command(
    ctx: typer.Context,
    obligation: ObligationArgument,
    note: NoteOption,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Mark an open or overdue obligation fulfilled: it was done, the note says how."""
    settle(
        ctx,
        "fulfil",
        obligation,
        note=note,
        yes=yes,
        dry_run=dry_run,
        key=key,
        output=output,
        url=url,
        token=token,
        context=context,
    )


@obligation_app.command("waive", cls=IrqCommand)
def waive_command(
    ctx: typer.Context,
    obligation: ObligationArgument,
    note: NoteOption,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Waive an open or overdue obligation: it need not be done, the note says why."""
    settle(
        ctx,
        "waive",
        obligation,
        note=note,
        yes=yes,
        dry_run=dry_run,
        key=key,
        output=output,
        url=url,
        token=token,
        context=context,
    )
