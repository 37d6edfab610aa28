"""``irq decide ITEM --call …``: one decision per action request of a batched interrupt
(LangGraph's HumanInTheLoopMiddleware asks about several tool calls in one interrupt), in
order; the run resumes once with all of them. The gateway checks each call (allowed for that
call, edited arguments against the policy) with the one decision check."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from console.cli.completion import complete_pending_interrupt_ids
from console.cli.decisions import decide, parse_json_value
from console.cli.exits import ExitCode, fail
from console.cli.options import (
    ContextOption,
    DryRunOption,
    KeyOption,
    OutputOption,
    ReasonOption,
    TokenOption,
    UrlOption,
    WaitOption,
    YesOption,
)
from console.cli.output import OutputFormat
from console.cli.session import connection_of

if TYPE_CHECKING:
    from console.model import Decision

CALL_HELP = (
    "One call's decision, in the order `irq show` lists the calls: approve, edit=JSON "
    "(the call's edited arguments; @FILE works), reject=TEXT (feedback for the agent) or "
    "respond=TEXT. Repeat once per call."
)


BatchedInterruptArgument = Annotated[
    str,
    typer.Argument(
        help="Interrupt id (RUN_ID#INTERRUPT_ID), its native id, or an unambiguous prefix.",
        show_default=False,
        metavar="INTERRUPT",
        autocompletion=complete_pending_interrupt_ids,
    ),
]


def parse_call(text: str, position: int) -> Decision:
    """``KIND`` or ``KIND=VALUE`` → a per-call Decision (exit 2 on anything else)."""
    from console.model import Decision, DecisionKind

    name, sep, value = text.partition("=")
    try:
        kind = DecisionKind(name.strip().lower())
    except ValueError:
        fail(ExitCode.USAGE, f"--call {position}: {name!r} is not approve, edit, reject or "
             "respond")
    option = f"--call {position}"
    if kind is DecisionKind.APPROVE:
        if sep:
            fail(ExitCode.USAGE, f"{option}: approve takes no value")
        return Decision(kind=kind)
    if not sep:
        fail(ExitCode.USAGE, f"{option}: {kind.value} needs a value ({kind.value}=…)")
    if kind is DecisionKind.EDIT:
        args = parse_json_value(value, option)
        if not isinstance(args, dict):
            fail(ExitCode.USAGE, f"{option}: edit takes a JSON object of arguments")
        return Decision(kind=kind, args=args)
    if kind is DecisionKind.REJECT:
        return Decision(kind=kind, feedback=value)
    try:
        response: object = json.loads(value)
    except json.JSONDecodeError:
        response = value
    return Decision(kind=kind, response=response)


def decide_calls_command(
    ctx: typer.Context,
    calls: Annotated[
        list[str],
        typer.Option("--call", metavar="KIND[=VALUE]", help=CALL_HELP, show_default=False),
    ],
    interrupt: BatchedInterruptArgument,
    wait: WaitOption = None,
    reason: ReasonOption = "",
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Decide each call of a batched interrupt on its own (approve one, edit a second,
    reject a third); the run resumes once with the decisions in order."""
    from console.model import Decision

    parsed = [parse_call(text, i + 1) for i, text in enumerate(calls)]
    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision.batched(parsed),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        wait_s=wait,
    )
