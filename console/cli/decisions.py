"""``irq approve|edit|reject|respond INTERRUPT``: decide a pending interrupt, exactly once.

A second decision on the same interrupt (from this or any other client) is a conflict
(exit 4); the gateway never delivers it twice. ``--key`` lets a script retry safely.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.actions import KeyOption, ReasonOption
from console.cli.exits import ExitCode, fail
from console.cli.output import OutputFormat, OutputOption, suggest
from console.cli.results import print_results
from console.cli.session import (
    ContextOption,
    TokenOption,
    UrlOption,
    connection_of,
    expand_interrupt_id,
    read_only_guard,
    with_gateway,
)

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.config import Connection
    from console.model import CommandResult, Decision

InterruptArgument = Annotated[
    str,
    typer.Argument(
        help="Interrupt id (RUN_ID#INTERRUPT_ID), its native id, or an unambiguous prefix.",
        show_default=False,
        metavar="INTERRUPT",
    ),
]


def parse_json_value(text: str, option: str) -> Any:
    """JSON from the option value, ``@FILE`` or ``-`` (stdin); exit 2 when it is not JSON."""
    source = option
    if text == "-":
        text, source = sys.stdin.read(), f"{option} (stdin)"
    elif text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            text, source = path.read_text(), f"{option} ({path})"
        except OSError as exc:
            fail(ExitCode.USAGE, f"cannot read {path}: {exc.strerror or exc}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(
            ExitCode.USAGE,
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        )


def decide(
    conn: Connection,
    interrupt: str,
    decision: Decision,
    *,
    reason: str,
    key: str | None,
    output: OutputFormat,
    merge_args: bool = False,
) -> None:
    """Send ``decision`` about one interrupt; ``merge_args`` lays an edit's arguments over
    the proposed ones (from the snapshot) instead of replacing them."""
    read_only_guard(conn, f"{decision.kind.value} an interrupt")
    kind = decision.kind.value

    async def send(client: GatewayClient) -> tuple[str, list[CommandResult]]:
        from console.model import Action

        interrupt_id = expand_interrupt_id(client.view, interrupt)
        known = client.view.interrupts.get(interrupt_id)
        if known is not None and decision.kind not in known.allowed_decisions:
            allowed = ", ".join(d.value for d in known.allowed_decisions) or "none"
            fail(
                ExitCode.USAGE,
                f"{interrupt_id} does not allow '{kind}' (allowed: {allowed})",
            )
        to_send = decision
        if merge_args:
            if known is None:
                fail(
                    ExitCode.NOT_FOUND,
                    f"{interrupt_id} is not in the gateway's snapshot: cannot merge into its "
                    "proposed arguments",
                    hint="pass the complete arguments without --merge",
                )
            merged = {**known.args, **(decision.args or {})}
            to_send = decision.model_copy(update={"args": merged})
        results = await client.command(
            Action.DECIDE, [interrupt_id], reason=reason, decision=to_send, key=key
        )
        return interrupt_id, results

    interrupt_id, results = with_gateway(conn, send)
    code = print_results(results, output)
    if output is OutputFormat.TEXT:
        run_id = interrupt_id.partition("#")[0]
        if code is ExitCode.OK:
            suggest([f"irq show {run_id}", "irq inbox"])
        elif code is ExitCode.CONFLICT:
            suggest([f"irq audit --target {interrupt_id}"])
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


def approve_command(
    ctx: typer.Context,
    interrupt: InterruptArgument,
    reason: ReasonOption = "",
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Approve: the run performs the proposed action with the proposed arguments."""
    from console.model import Decision, DecisionKind

    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision(kind=DecisionKind.APPROVE),
        reason=reason,
        key=key,
        output=output,
    )


def edit_command(
    ctx: typer.Context,
    interrupt: InterruptArgument,
    args: Annotated[
        str,
        typer.Option(
            "--args",
            help="The edited arguments: a JSON object, @FILE, or - for stdin. The gateway "
            "validates them against the interrupt's schema.",
            show_default=False,
        ),
    ],
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            "-m",
            help="Lay --args over the proposed arguments (change only the keys given).",
        ),
    ] = False,
    reason: ReasonOption = "",
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Edit: the run performs the proposed action with these arguments instead."""
    from console.model import Decision, DecisionKind

    value = parse_json_value(args, "--args")
    if not isinstance(value, dict):
        fail(ExitCode.USAGE, f"--args must be a JSON object, not {type(value).__name__}")
    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision(kind=DecisionKind.EDIT, args=value),
        reason=reason,
        key=key,
        output=output,
        merge_args=merge,
    )


def reject_command(
    ctx: typer.Context,
    interrupt: InterruptArgument,
    feedback: Annotated[
        str,
        typer.Option(
            "--feedback",
            "-f",
            help="Why not; this text goes back to the agent.",
            show_default=False,
        ),
    ],
    reason: ReasonOption = "",
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Reject: the proposed action does not run; the feedback goes back to the agent."""
    from console.model import Decision, DecisionKind

    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision(kind=DecisionKind.REJECT, feedback=feedback),
        reason=reason or feedback,
        key=key,
        output=output,
    )


def respond_command(
    ctx: typer.Context,
    interrupt: InterruptArgument,
    text: Annotated[
        str | None,
        typer.Option("--text", "-t", help="The answer, as text.", show_default=False),
    ] = None,
    json_value: Annotated[
        str | None,
        typer.Option(
            "--json",
            help="The answer, as JSON (a value, @FILE, or - for stdin).",
            show_default=False,
        ),
    ] = None,
    reason: ReasonOption = "",
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Respond: your answer is the result (ask-the-user style interrupts)."""
    from console.model import Decision, DecisionKind

    if (text is None) == (json_value is None):
        fail(ExitCode.USAGE, "give exactly one of --text or --json")
    response: Any = text if json_value is None else parse_json_value(json_value, "--json")
    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision(kind=DecisionKind.RESPOND, response=response),
        reason=reason,
        key=key,
        output=output,
    )
