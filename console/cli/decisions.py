"""``irq approve|edit|reject|respond INTERRUPT``: decide a pending interrupt, exactly once.

Like every mutation it shows what will be decided (run, title, action and arguments, an edit
as a diff, the allowed decisions) and asks, default No; ``--yes`` skips the question,
``--dry-run`` only shows, and without a terminal it refuses unless ``--yes`` is given.

A second decision on the same interrupt (from this or any other client) is a conflict
(exit 4); the gateway never delivers it twice. ``--key`` lets a script retry safely.
"""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.bulk import DEFAULT_MAX, bulk_decide, refuse_ids_and_filter
from console.cli.completion import complete_pending_interrupt_ids
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode, fail
from console.cli.options import (
    ContextOption,
    DryRunOption,
    KeyOption,
    MaxOption,
    OutputOption,
    ReasonOption,
    TargetFilterOption,
    TokenOption,
    UrlOption,
    WaitOption,
    YesOption,
)
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    stderr_console,
    stdout_console,
    styled,
    suggest,
)
from console.cli.results import print_results
from console.cli.session import connection_of, expand_interrupt_id, with_gateway
from console.cli.wait import refuse_bad_wait

if TYPE_CHECKING:
    from rich.console import Console

    from console.client import GatewayClient
    from console.config import Connection
    from console.model import CommandResult, Decision, Interrupt

InterruptArgument = Annotated[
    str | None,
    typer.Argument(
        help="Interrupt id (RUN_ID#INTERRUPT_ID), its native id, or an unambiguous prefix "
        "(or --filter).",
        show_default=False,
        metavar="INTERRUPT",
        autocompletion=complete_pending_interrupt_ids,
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


@dataclass
class DecisionPreview:
    """What a decision will do: the resolved interrupt, what the snapshot knows of it and its
    run, and the exact decision that will be sent (an edit's arguments already merged)."""

    interrupt_id: str
    decision: Decision
    interrupt: Interrupt | None = None
    run: dict[str, Any] | None = None

    def contract(self, reason: str) -> dict[str, Any]:
        decision: dict[str, Any] = {"kind": self.decision.kind.value}
        decision.update({k: v for k, v in self.decision.payload().items() if k != "type"})
        return {
            "action": "decide",
            "target": self.interrupt_id,
            "decision": decision,
            "reason": reason,
            "interrupt": self.interrupt.contract() if self.interrupt else None,
            "run": self.run,
        }


def _prepare(
    client: GatewayClient, interrupt: str, decision: Decision, *, merge_args: bool
) -> DecisionPreview:
    """Resolve the id (strictly), check the decision is allowed, lay an edit over the
    proposed arguments when asked to."""
    interrupt_id = expand_interrupt_id(client.view, interrupt)
    known = client.view.interrupts.get(interrupt_id)
    kind = decision.kind.value
    if known is not None and decision.kind not in known.allowed_decisions:
        allowed = ", ".join(d.value for d in known.allowed_decisions) or "none"
        fail(ExitCode.USAGE, f"{interrupt_id} does not allow '{kind}' (allowed: {allowed})")
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
    run_id = interrupt_id.partition("#")[0]
    run = client.view.runs.get(run_id)
    return DecisionPreview(
        interrupt_id, to_send, known, run.contract() if run is not None else None
    )


def _json_lines(value: Any) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str).splitlines()


def args_diff(proposed: dict[str, Any], edited: dict[str, Any]) -> list[str]:
    """The edit as a unified diff of the arguments (pretty JSON, whole object as context)."""
    before, after = _json_lines(proposed), _json_lines(edited)
    return list(
        difflib.unified_diff(
            before, after, "proposed", "edited", lineterm="", n=max(len(before), len(after))
        )
    )


def render_preview(preview: DecisionPreview, console: Console, *, reason: str) -> None:
    """Run, interrupt title, action and arguments (or the edit as a diff), allowed decisions,
    and what goes back to the agent. Agent text goes through ``esc`` (never interpreted)."""
    decision = preview.decision
    kind = decision.kind.value
    intr = preview.interrupt
    lines: list[str] = [f"[bold]{esc(kind)}[/] {esc(preview.interrupt_id)}"]

    def row(label: str, value: str) -> None:
        lines.append(f"  [dim]{label:<10}[/] {value}")

    run = preview.run
    if run is not None:
        name = f" ({esc(run.get('name'))})" if run.get("name") else ""
        row("run", f"{esc(run.get('id'))}{name}  {styled(str(run.get('state', '')))}")
    else:
        row("run", esc(preview.interrupt_id.partition("#")[0]))
    if intr is None:
        row("interrupt", "[yellow]not in the gateway's snapshot[/]")
    else:
        row("title", esc(intr.title))
        if intr.description:
            row("details", esc(intr.description))
        row("action", esc(intr.action or "-"))
        row("status", styled(intr.status))
        allowed = ", ".join(d.value for d in intr.allowed_decisions) or "none"
        row("allowed", esc(allowed))
    if kind == "edit":
        diff = args_diff(intr.args if intr is not None else {}, decision.args or {})
        row("arguments", "(edit, as a diff against the proposed ones)" if diff else "unchanged")
        for line in diff:
            style = {"-": "red", "+": "green", "@": "dim"}.get(line[:1], "")
            text = esc(line)
            lines.append(f"    [{style}]{text}[/]" if style else f"    {text}")
    elif intr is not None:
        row("arguments", "(as proposed)" if intr.args else "none")
        lines += [f"    {esc(line)}" for line in _json_lines(intr.args)] if intr.args else []
    if kind == "reject":
        row("feedback", esc(decision.feedback or ""))
    if kind == "respond":
        text = decision.response
        row("response", esc(text if isinstance(text, str) else json.dumps(text)))
    row("reason", esc(reason) if reason else "[dim]none[/]")
    for line in lines:
        console.print(line)


#: what each decision needs besides the id, for the suggested next command
_DECISION_INPUT = {
    "approve": "",
    "edit": " --args JSON",
    "reject": " --feedback TEXT",
    "respond": " --text TEXT",
}


def decide(
    conn: Connection,
    interrupt: str | None,
    decision: Decision,
    *,
    reason: str,
    key: str | None,
    output: OutputFormat,
    yes: bool = False,
    dry_run: bool = False,
    merge_args: bool = False,
    filter_expr: str | None = None,
    max_n: int = DEFAULT_MAX,
    wait_s: float | None = None,
) -> None:
    """Send ``decision`` about one interrupt, after the operator saw it and said yes (or
    passed --yes); ``merge_args`` lays an edit's arguments over the proposed ones (from the
    snapshot) instead of replacing them. With ``filter_expr``: every pending interrupt the
    filter selects (``console.cli.bulk``). ``wait_s``: wait until the agent consumed it."""
    from console.model import Action

    refuse_ids_and_filter([interrupt] if interrupt else [], filter_expr, "interrupt")
    refuse_bad_wait(wait_s)
    if filter_expr is not None:
        bulk_decide(
            conn,
            filter_expr,
            decision,
            reason=reason,
            yes=yes,
            dry_run=dry_run,
            key=key,
            output=output,
            max_n=max_n,
            wait_s=wait_s,
            merge_args=merge_args,
        )
        return
    assert interrupt is not None
    kind = decision.kind.value
    refuse_unconfirmable(conn, f"{kind} an interrupt", yes=yes, dry_run=dry_run)

    async def send(client: GatewayClient, preview: DecisionPreview) -> list[CommandResult]:
        return await client.command(
            Action.DECIDE,
            [preview.interrupt_id],
            reason=reason,
            decision=preview.decision,
            key=key,
        )

    if yes and not dry_run:

        async def prepare_and_send(
            client: GatewayClient,
        ) -> tuple[DecisionPreview, list[CommandResult]]:
            preview = _prepare(client, interrupt, decision, merge_args=merge_args)
            return preview, await send(client, preview)

        if wait_s is not None:
            from console.cli.wait import with_live_gateway

            async def prepare_send_wait(client: GatewayClient) -> tuple[DecisionPreview, Any]:
                preview, results = await prepare_and_send(client)
                return preview, (results, await _wait_applied(client, results, wait_s))

            preview, (results, waited) = with_live_gateway(conn, prepare_send_wait)
            _finish_waited(preview.interrupt_id, results, waited, output)
            return
        preview, results = with_gateway(conn, prepare_and_send)
    else:

        async def prepare(client: GatewayClient) -> DecisionPreview:
            return _prepare(client, interrupt, decision, merge_args=merge_args)

        preview = with_gateway(conn, prepare)
        if preview.interrupt is None:
            fail(
                ExitCode.NOT_FOUND,
                f"{preview.interrupt_id} is not in the gateway's snapshot: nothing to show",
                hint="list pending interrupts with `irq inbox` (or decide blindly with --yes)",
            )
        if dry_run:
            emit(
                output,
                preview.contract(reason),
                lambda: render_preview(preview, stdout_console(), reason=reason),
            )
            if output is OutputFormat.TEXT:
                suggest([f"irq {kind} {preview.interrupt_id}{_DECISION_INPUT[kind]}"])
            return
        if preview.interrupt.status != "pending":
            fail(
                ExitCode.CONFLICT,
                f"{preview.interrupt_id} is {preview.interrupt.status}, not pending",
                hint=f"irq audit --target {preview.interrupt_id}",
            )
        render_preview(preview, stderr_console(), reason=reason)
        ask_or_stop(f"{kind} this interrupt?")

        async def send_prepared(client: GatewayClient) -> list[CommandResult]:
            return await send(client, preview)

        if wait_s is not None:
            from console.cli.wait import with_live_gateway

            async def send_and_wait(client: GatewayClient) -> tuple[list[CommandResult], Any]:
                results = await send(client, preview)
                return results, await _wait_applied(client, results, wait_s)

            results, waited = with_live_gateway(conn, send_and_wait)
            _finish_waited(preview.interrupt_id, results, waited, output)
            return
        results = with_gateway(conn, send_prepared)

    interrupt_id = preview.interrupt_id
    code = print_results(results, output)
    if output is OutputFormat.TEXT:
        run_id = interrupt_id.partition("#")[0]
        if code is ExitCode.OK:
            suggest([f"irq show {run_id}", "irq inbox"])
        elif code is ExitCode.CONFLICT:
            suggest([f"irq audit --target {interrupt_id}"])
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


async def _wait_applied(
    client: GatewayClient, results: list[CommandResult], wait_s: float
) -> Any:
    from console.cli.wait import wait_for_effects

    applied = [r.target for r in results if r.outcome == "applied"]
    return await wait_for_effects(client, "decide", applied, wait_s)


def _finish_waited(
    interrupt_id: str, results: list[CommandResult], waited: Any, output: OutputFormat
) -> None:
    from console.cli.bulk import finish

    run_id = interrupt_id.partition("#")[0]
    finish("decide", results, waited, output, [f"irq show {run_id}", "irq inbox"])


def approve_command(
    ctx: typer.Context,
    interrupt: InterruptArgument = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
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
    """Approve: the run performs the proposed action with the proposed arguments."""
    from console.model import Decision, DecisionKind

    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision(kind=DecisionKind.APPROVE),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        filter_expr=filter_expr,
        max_n=max_n,
        wait_s=wait,
    )


def edit_command(
    ctx: typer.Context,
    args: Annotated[
        str,
        typer.Option(
            "--args",
            metavar="JSON",
            help="The edited arguments: a JSON object, @FILE, or - for stdin. The gateway "
            "validates them against the interrupt's schema.",
            show_default=False,
        ),
    ],
    interrupt: InterruptArgument = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
    wait: WaitOption = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            "-m",
            help="Lay --args over the proposed arguments (change only the keys given).",
        ),
    ] = False,
    reason: ReasonOption = "",
    yes: YesOption = False,
    dry_run: DryRunOption = False,
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
        yes=yes,
        dry_run=dry_run,
        merge_args=merge,
        filter_expr=filter_expr,
        max_n=max_n,
        wait_s=wait,
    )


def reject_command(
    ctx: typer.Context,
    feedback: Annotated[
        str,
        typer.Option(
            "--feedback",
            "-f",
            help="Why not; this text goes back to the agent.",
            show_default=False,
        ),
    ],
    interrupt: InterruptArgument = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
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
    """Reject: the proposed action does not run; the feedback goes back to the agent."""
    from console.model import Decision, DecisionKind

    decide(
        connection_of(ctx, url, token, context),
        interrupt,
        Decision(kind=DecisionKind.REJECT, feedback=feedback),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        filter_expr=filter_expr,
        max_n=max_n,
        wait_s=wait,
    )


def respond_command(
    ctx: typer.Context,
    interrupt: InterruptArgument = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
    wait: WaitOption = None,
    text: Annotated[
        str | None,
        typer.Option("--text", help="The answer, as text.", show_default=False),
    ] = None,
    json_value: Annotated[
        str | None,
        typer.Option(
            "--json",
            metavar="JSON",
            help="The answer, as JSON (a value, @FILE, or - for stdin).",
            show_default=False,
        ),
    ] = None,
    reason: ReasonOption = "",
    yes: YesOption = False,
    dry_run: DryRunOption = False,
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
        yes=yes,
        dry_run=dry_run,
        filter_expr=filter_expr,
        max_n=max_n,
        wait_s=wait,
    )
