"""``irq approve|edit|reject|respond INTERRUPT``: decide a pending interrupt, exactly once.

Like every mutation it shows what will be decided (run, title, action and arguments, an edit
as a diff, the allowed decisions) and asks, default No; ``--yes`` skips the question,
``--dry-run`` only shows, and without a terminal it refuses unless ``--yes`` is given.

A second decision on the same interrupt (from this or any other client) is a conflict
(exit 4); the gateway never delivers it twice. ``--key`` lets a script retry safely.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.bulk import DEFAULT_MAX, bulk_decide, refuse_ids_and_filter
from console.cli.completion import complete_pending_interrupt_ids
from console.cli.confirm import ask_or_stop_while_connected, refuse_unconfirmable
from console.cli.decision_preview import (
    DecisionPreview,
    decision_input,
    prepare_decision,
    refuse_decided,
    refuse_unseen,
    render_preview,
)
from console.cli.exits import ExitCode, fail
from console.cli.options import (
    ContextOption,
    DetachOption,
    DryRunOption,
    HandlerOption,
    KeyOption,
    MaxOption,
    OutputOption,
    RateOption,
    ReasonOption,
    TargetFilterOption,
    TokenOption,
    TopicOption,
    UrlOption,
    WaitOption,
    YesOption,
    parse_rate,
)
from console.cli.output import OutputFormat, emit, stderr_console, stdout_console, suggest
from console.cli.results import print_results
from console.cli.session import connection_of, with_gateway
from console.cli.wait import refuse_bad_wait

if TYPE_CHECKING:
    from console.cli.wait import Waited
    from console.client import GatewayClient
    from console.config import Connection
    from console.model import CommandResult, Decision

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


@dataclass(frozen=True)
class DecisionRequest:
    """One decision on one interrupt (by id), as the operator asked for it."""

    interrupt: str
    decision: Decision
    reason: str
    key: str | None
    output: OutputFormat
    yes: bool = False
    dry_run: bool = False
    merge_args: bool = False
    wait_s: float | None = None

    @property
    def kind(self) -> str:
        return self.decision.kind.value

    @property
    def subscribes(self) -> bool:
        """``--wait``: the connection follows events, to see the decision consumed."""
        return self.wait_s is not None and not self.dry_run

    async def carry_out(self, client: GatewayClient) -> DecisionOutcome:
        """The whole decision on one connection and its one snapshot: resolve the id and
        check the decision, show it and ask (unless --yes), send it, wait for the agent
        to consume it (--wait)."""
        from console.model import Action

        preview = prepare_decision(
            client.view, self.interrupt, self.decision, merge_args=self.merge_args
        )
        if self.dry_run or not self.yes:
            shown = refuse_unseen(preview)
            if self.dry_run:
                return DecisionOutcome(preview)
            refuse_decided(shown)
            render_preview(preview, stderr_console(), reason=self.reason)
            await ask_or_stop_while_connected(f"{self.kind} this interrupt?")
        results = await client.command(
            Action.DECIDE,
            [preview.interrupt_id],
            reason=self.reason,
            decision=preview.decision,
            key=self.key,
        )
        waited = None
        if self.wait_s is not None:
            from console.cli.wait import wait_for_effects

            applied = [r.target for r in results if r.outcome == "applied"]
            waited = await wait_for_effects(client, "decide", applied, self.wait_s)
        return DecisionOutcome(preview, results, waited)


@dataclass
class DecisionOutcome:
    """What came of a :class:`DecisionRequest`: no results for a dry run."""

    preview: DecisionPreview
    results: list[CommandResult] | None = None
    waited: list[Waited] | None = None

    def report(self, request: DecisionRequest) -> None:
        """The dry run's preview, or the result (and what --wait saw); the exit code."""
        interrupt_id = self.preview.interrupt_id
        run_id = interrupt_id.partition("#")[0]
        output, kind = request.output, request.kind
        if self.results is None:
            contract = self.preview.contract(request.reason)
            emit(output, contract, partial(self._print_preview, request.reason))
            if output is OutputFormat.TEXT:
                intr = self.preview.interrupt
                suggest([f"irq {kind} {interrupt_id}"
                         f"{decision_input(kind, intr.contract() if intr else None)}"])
            return
        if self.waited is not None:
            from console.cli.bulk import finish

            finish("decide", self.results, self.waited, output, [f"irq show {run_id}", "irq inbox"])
            return
        code = print_results(self.results, output)
        if output is OutputFormat.TEXT:
            if code is ExitCode.OK:
                suggest([f"irq show {run_id}", "irq inbox"])
            elif code is ExitCode.CONFLICT:
                suggest([f"irq audit --target {interrupt_id}"])
        if code is not ExitCode.OK:
            raise typer.Exit(int(code))

    def _print_preview(self, reason: str) -> None:
        render_preview(self.preview, stdout_console(), reason=reason)


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
    rate: str | None = None,
    detach: bool = False,
) -> None:
    """Send ``decision`` about one interrupt, after the operator saw it and said yes (or
    passed --yes); ``merge_args`` lays an edit's arguments over the proposed ones (from the
    snapshot) instead of replacing them. With ``filter_expr``: every pending interrupt the
    filter selects (``console.cli.bulk``). ``wait_s``: wait until the agent consumed it."""
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
            rate_per_s=parse_rate(rate),
            detach=detach,
        )
        return
    assert interrupt is not None
    request = DecisionRequest(
        interrupt, decision, reason, key, output, yes, dry_run, merge_args, wait_s
    )
    refuse_unconfirmable(conn, f"{request.kind} an interrupt", yes=yes, dry_run=dry_run)
    outcome = with_gateway(conn, request.carry_out, subscribe=request.subscribes)
    outcome.report(request)


def approve_command(
    ctx: typer.Context,
    interrupt: InterruptArgument = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
    rate: RateOption = None,
    detach: DetachOption = False,
    wait: WaitOption = None,
    handler: HandlerOption = None,
    topic: TopicOption = None,
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
        Decision(kind=DecisionKind.APPROVE, handler=handler, topic=topic),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        filter_expr=filter_expr,
        max_n=max_n,
        rate=rate,
        detach=detach,
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
    rate: RateOption = None,
    detach: DetachOption = False,
    wait: WaitOption = None,
    handler: HandlerOption = None,
    topic: TopicOption = None,
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
        Decision(kind=DecisionKind.EDIT, args=value, handler=handler, topic=topic),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        merge_args=merge,
        filter_expr=filter_expr,
        max_n=max_n,
        rate=rate,
        detach=detach,
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
    rate: RateOption = None,
    detach: DetachOption = False,
    wait: WaitOption = None,
    handler: HandlerOption = None,
    topic: TopicOption = None,
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
        Decision(
            kind=DecisionKind.REJECT, feedback=feedback, handler=handler, topic=topic
        ),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        filter_expr=filter_expr,
        max_n=max_n,
        rate=rate,
        detach=detach,
        wait_s=wait,
    )


def respond_command(
    ctx: typer.Context,
    interrupt: InterruptArgument = None,
    filter_expr: TargetFilterOption = None,
    max_n: MaxOption = DEFAULT_MAX,
    rate: RateOption = None,
    detach: DetachOption = False,
    wait: WaitOption = None,
    handler: HandlerOption = None,
    topic: TopicOption = None,
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
        Decision(
            kind=DecisionKind.RESPOND, response=response, handler=handler, topic=topic
        ),
        reason=reason,
        key=key,
        output=output,
        yes=yes,
        dry_run=dry_run,
        filter_expr=filter_expr,
        max_n=max_n,
        rate=rate,
        detach=detach,
        wait_s=wait,
    )
