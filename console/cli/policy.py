"""``irq policy show|check|explain|test|reload``: the policy the gateway enforces.

``check`` and ``explain`` ask the running gateway's policy about one invocation (the query
``policy_check``; nothing runs, nothing is recorded); ``test`` runs a file of cases locally,
like ``opa test``, without a gateway; ``reload`` is the admin command ``policy_reload``.
The CEL library behind the engine is a compiled extension: only ``test`` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console.cli.answers import answer_dict, answer_model
from console.cli.completion import complete_pending_interrupt_ids, complete_run_ids
from console.cli.confirm import ask_or_stop, refuse_unconfirmable
from console.cli.exits import ExitCode, fail
from console.cli.help_layout import IrqCommand, IrqGroup
from console.cli.options import (
    ContextOption,
    KeyOption,
    OutputOption,
    ReasonOption,
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
    print_text,
    stderr_console,
    suggest,
)
from console.cli.session import connection_of, expand_interrupt_id, expand_run_id, with_gateway

if TYPE_CHECKING:
    from console.client import GatewayClient
    from console.model import CommandResult
    from console.policy.model import Invocation, PolicyDecision

policy_app = typer.Typer(
    cls=IrqGroup,
    help="The policy the gateway enforces: show it, check or explain a tool call against it, "
    "test a file of cases, reload it.",
    no_args_is_help=True,
)


def print_policy_results(results: list[CommandResult], output: OutputFormat) -> ExitCode:
    """Per-item results of a policy or obligation command (no resources involved: target,
    outcome, detail), or their contracts as json/jsonl; the exit code."""
    from console.cli.exits import code_for_results
    from console.cli.output import styled

    def text() -> None:
        if not results:
            hint("the gateway returned no results")
            return
        table = make_table("target", "outcome", "detail")
        for result in results:
            outcome = styled(result.outcome)
            if result.replayed:
                outcome += " [dim](replayed)[/]"
            detail = result.detail or ""
            if result.error and result.error != result.outcome and result.error not in detail:
                detail = f"{result.error}: {detail}" if detail else result.error
            table.add_row(esc(result.target), outcome, esc(detail or "-"))
        print_table(table)

    emit(output, [r.contract() for r in results], text)
    return code_for_results(results)


# ------------------------------------------------------------------------------ irq policy show


def _rules_table(rules: list[dict[str, Any]]) -> None:
    table = make_table("id", "on", "modality", "action", "object", "priority")
    for rule in rules:
        table.add_row(
            esc(rule.get("id")),
            esc(rule.get("on", "tool")),
            esc(rule.get("modality")),
            esc(", ".join(str(a) for a in rule.get("action") or []) or "any"),
            esc(", ".join(str(o) for o in rule.get("object") or []) or "any"),
            str(rule.get("priority", 0)),
        )
    print_table(table)


def _render_policy(data: dict[str, Any]) -> None:
    policy = data.get("policy") if isinstance(data.get("policy"), dict) else None
    rows = [
        ("version", esc(data.get("version") or "-")),
        ("source", esc(data.get("source") or "-")),
        ("loaded", fmt_time(data.get("loaded_at"))),
    ]
    if policy is not None:
        rows.append(("default", esc(policy.get("default", "permit"))))
        rows.append(("meta", esc(" > ".join(policy.get("meta") or []))))
    for key, value in rows:
        print_text(f"[bold]{key:<8}[/]  {value}")
    if data.get("last_error"):
        error = esc(data["last_error"])
        print_text(f"[bold red]{'error':<8}[/]  {error} [dim](the last good policy stays)[/]")
    if policy is None:
        hint("no policy loaded: start the gateway with `irq serve --policy FILE`")
        return
    rules = [r for r in policy.get("rules") or [] if isinstance(r, dict)]
    print_text()
    if not rules:
        print_text("[bold]Rules[/]  none (every call gets the default)")
        return
    print_text(f"[bold]Rules[/]  {len(rules)}")
    _rules_table(rules)
    suggest(["irq policy explain --tool NAME --args JSON"])


@policy_app.command("show", cls=IrqCommand)
def show_command(
    ctx: typer.Context,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """The loaded policy: its version (content hash), source file, load time and rules."""
    conn = connection_of(ctx, url, token, context)

    async def fetch(client: GatewayClient) -> dict[str, Any]:
        return answer_dict(await client.query("policy"), "to a policy query")

    data = with_gateway(conn, fetch)
    emit(output, data, lambda: _render_policy(data))


# --------------------------------------------------------------------- irq policy check/explain

ToolOption = Annotated[
    str | None,
    typer.Option(
        "--tool", metavar="NAME", help="The tool the agent would call.", show_default=False
    ),
]
#: what a command rule (on = "command") names: run actions and interrupt decisions
COMMAND_VERBS = ("pause", "resume", "cancel", "terminate", "approve", "edit", "reject", "respond")
CommandOption = Annotated[
    str | None,
    typer.Option(
        "--command",
        metavar="ACTION",
        help="Check an operator command instead of a tool call, as you (this token's identity "
        "and role): " + "|".join(COMMAND_VERBS) + ", with --run or --interrupt.",
        show_default=False,
    ),
]
InterruptOption = Annotated[
    str | None,
    typer.Option(
        "--interrupt",
        metavar="INTERRUPT",
        help="With --command approve|edit|reject|respond: the interrupt decided.",
        autocompletion=complete_pending_interrupt_ids,
        show_default=False,
    ),
]
CheckReasonOption = Annotated[
    str, typer.Option("--reason", "-r", help="With --command: the reason you would give.")
]
ArgsOption = Annotated[
    str,
    typer.Option(
        "--args",
        metavar="JSON",
        help="The call's arguments: a JSON object, @FILE, or - for stdin.",
    ),
]
AgentOption = Annotated[
    str, typer.Option("--agent", metavar="NAME", help="The calling agent's name.")
]
TeamOption = Annotated[str, typer.Option("--team", help="The calling agent's team.")]
DataOption = Annotated[
    list[str] | None,
    typer.Option(
        "--data",
        metavar="CLASS",
        help="A data class or dataset the call touches (repeatable, or comma-separated); "
        "datasets bring their classes and lineage.",
        show_default=False,
    ),
]
BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        "-b",
        metavar="BACKEND[:CONTEXT]",
        help="The run's backend, and its context after a colon (dbos, or dbos:prod); "
        "default: the --run's.",
    ),
]
RunOption = Annotated[
    str | None,
    typer.Option(
        "--run",
        metavar="RUN",
        help="The run making the call, or the command's target (id, native id or a unique prefix).",
        autocompletion=complete_run_ids,
        show_default=False,
    ),
]


def _data_list(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for value in values or []:
        for part in value.split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


@dataclass
class CheckRequest:
    """What ``irq policy check|explain`` asks: a tool call (``--tool``) or an operator
    command (``--command``), from the options as given."""

    tool: str | None
    command: str | None
    args: str
    agent: str
    team: str
    data: list[str] | None
    backend: str
    run: str | None
    interrupt: str | None
    reason: str

    def validate(self) -> dict[str, Any]:
        """Exit 2 on options that do not fit together (before connecting); the arguments."""
        from console.cli.decisions import parse_json_value

        if (self.tool is None) == (self.command is None):
            fail(ExitCode.USAGE, "give exactly one of --tool NAME or --command ACTION")
        if self.command is not None:
            if self.command not in COMMAND_VERBS:
                fail(
                    ExitCode.USAGE,
                    f"--command {self.command!r}: commands are " + ", ".join(COMMAND_VERBS),
                )
            extra = [
                flag
                for flag, given in (
                    ("--args", self.args != "{}"),
                    ("--agent", self.agent),
                    ("--team", self.team),
                    ("--data", self.data),
                    ("--backend", self.backend),
                )
                if given
            ]
            if extra:
                fail(
                    ExitCode.USAGE,
                    f"{', '.join(extra)} describe a tool call; a --command check takes "
                    "--run or --interrupt, and --reason",
                )
            return {}
        if self.interrupt or self.reason:
            fail(ExitCode.USAGE, "--interrupt and --reason go with --command, not --tool")
        if not (self.tool or "").strip():
            fail(ExitCode.USAGE, "--tool must name a tool")
        value = parse_json_value(self.args, "--args")
        if not isinstance(value, dict):
            fail(ExitCode.USAGE, f"--args must be a JSON object, not {type(value).__name__}")
        return value

    def invocation(self, client: GatewayClient, args: dict[str, Any]) -> Invocation:
        """The invocation, with the run (and for a command the interrupt, the caller's
        identity and role, the run's resources) resolved from the gateway's snapshot."""
        if self.command is not None:
            return self._command_invocation(client)
        from console.model import split_run_id
        from console.policy.model import Invocation

        kind, _, run_context = self.backend.partition(":")
        inv = Invocation(
            tool=self.tool or "",
            args=args,
            agent=self.agent,
            team=self.team,
            backend=kind,
            context=run_context,
            data=_data_list(self.data),
        )
        if not self.run:
            return inv
        run_id = expand_run_id(client.view, self.run)
        backend, context, _ = split_run_id(run_id)
        return inv.model_copy(
            update={
                "run_id": run_id,
                "backend": inv.backend or backend,
                "context": inv.context or (context if inv.backend in ("", backend) else ""),
            }
        )

    def _command_invocation(self, client: GatewayClient) -> Invocation:
        # the gateway's own rule for what a command looks like to the policy
        from console.gateway.command_policy import run_invocation

        view = client.view
        intr = None
        if self.interrupt:
            interrupt_id = expand_interrupt_id(view, self.interrupt)
            intr = view.interrupts.get(interrupt_id)
            if intr is None:
                fail(ExitCode.NOT_FOUND, f"{interrupt_id} is not in the gateway's snapshot")
        run_id = intr.run_id if intr else expand_run_id(view, self.run) if self.run else ""
        inv = run_invocation(
            self.command or "",
            view.runs.get(run_id),
            identity=client.identity,
            role=client.role,
            reason=self.reason,
            interrupt=intr,
        )
        return inv if inv.run_id or not run_id else inv.model_copy(update={"run_id": run_id})


def check_policy(
    ctx: typer.Context,
    request: CheckRequest,
    url: str | None,
    token: str | None,
    context: str | None,
) -> tuple[Invocation, PolicyDecision]:
    """Ask the running gateway's policy about the request (query ``policy_check``)."""
    from console.policy.model import PolicyDecision

    args = request.validate()
    conn = connection_of(ctx, url, token, context)

    async def ask(client: GatewayClient) -> tuple[Invocation, Any]:
        inv = request.invocation(client, args)
        answer = await client.query("policy_check", invocation=inv.model_dump(mode="json"))
        return inv, answer

    inv, answer = with_gateway(conn, ask)
    return inv, answer_model(PolicyDecision, answer, "to a policy check")


def _render_decision(decision: PolicyDecision) -> None:
    """The decision first (outcome, winner, what is owed, what was waived, the conflicts),
    then the table of every rule that matched (the winner starred)."""
    style = {"permit": "green", "prohibit": "bold red", "require_approval": "yellow"}
    rows = [
        ("outcome", f"[{style[decision.outcome]}]{esc(decision.outcome)}[/]"),
        ("winner", esc(decision.winner) if decision.winner else "[dim]none: the default[/]"),
    ]
    if decision.approval is not None:
        a = decision.approval
        who = f"{a.approvers} different {a.decide_role}s" if a.approvers > 1 else a.decide_role
        rows.append(("approval", esc(f"by {who}; decisions {', '.join(a.decisions)}")))
    for spec in decision.obligations:
        within = f" within {fmt_age(spec.within_s)}" if spec.within_s is not None else ""
        rows.append(("obliges", f"{esc(spec.what)}{esc(within)} [dim](rule {esc(spec.rule)})[/]"))
    for waiver in decision.waived:
        rows.append(
            (
                "waived",
                f"obligation of rule {esc(waiver.obligation_rule)} "
                f"[dim](by dispensation {esc(waiver.by)})[/]",
            )
        )
    rows += [("conflict", esc(conflict)) for conflict in decision.conflicts]
    rows.append(("policy", esc(decision.policy_version or "-")))
    for key, value in rows:
        print_text(f"[bold]{key:<8}[/]  {value}")
    print_text()
    if not decision.matched:
        print_text(f"[bold]Matched[/]  {esc(', '.join(decision.rules)) or 'no rule'}")
        return
    table = make_table("rule", "modality", "priority", "specificity", "why")
    for m in decision.matched:
        mark = " [bold]*[/]" if m.id == decision.winner else ""
        table.add_row(
            esc(m.id) + mark, esc(m.modality), str(m.priority), str(m.specificity), esc(m.why)
        )
    print_table(table)


def check_command(
    ctx: typer.Context,
    tool: ToolOption = None,
    args: ArgsOption = "{}",
    agent: AgentOption = "",
    team: TeamOption = "",
    data: DataOption = None,
    backend: BackendOption = "",
    run: RunOption = None,
    command: CommandOption = None,
    interrupt: InterruptOption = None,
    reason: CheckReasonOption = "",
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """What the running gateway's policy decides for a tool call (or, with --command, for
    your operator command): outcome, matched rules, winner, obligations. Nothing runs and
    nothing is recorded."""
    request = CheckRequest(tool, command, args, agent, team, data, backend, run, interrupt, reason)
    full, decision = check_policy(ctx, request, url, token, context)
    emit(output, decision.model_dump(mode="json"), lambda: _render_decision(decision))
    if output is OutputFormat.TEXT:
        suggest([_explain_line(full)])


def _explain_line(inv: Invocation) -> str:
    """The ``irq policy explain`` command line for ``inv`` (a suggestion to copy)."""
    import json
    import shlex

    if inv.on == "command":
        parts = ["irq policy explain", "--command", shlex.quote(inv.tool)]
        if inv.interrupt.get("id"):
            parts += ["--interrupt", shlex.quote(str(inv.interrupt["id"]))]
        elif inv.run_id:
            parts += ["--run", shlex.quote(inv.run_id)]
        if inv.reason:
            parts += ["--reason", shlex.quote(inv.reason)]
        return " ".join(parts)
    parts = ["irq policy explain", "--tool", shlex.quote(inv.tool)]
    if inv.args:
        parts += ["--args", shlex.quote(json.dumps(inv.args, separators=(",", ":")))]
    for flag, value in (("--agent", inv.agent), ("--team", inv.team)):
        if value:
            parts += [flag, shlex.quote(value)]
    for item in inv.data:
        parts += ["--data", shlex.quote(item)]
    if inv.run_id:
        parts += ["--run", shlex.quote(inv.run_id)]
    elif inv.backend:
        where = f"{inv.backend}:{inv.context}" if inv.context else inv.backend
        parts += ["--backend", shlex.quote(where)]
    return " ".join(parts)


def explain_command(
    ctx: typer.Context,
    tool: ToolOption = None,
    args: ArgsOption = "{}",
    agent: AgentOption = "",
    team: TeamOption = "",
    data: DataOption = None,
    backend: BackendOption = "",
    run: RunOption = None,
    command: CommandOption = None,
    interrupt: InterruptOption = None,
    reason: CheckReasonOption = "",
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """The same question as `irq policy check`, answered in prose: every rule that matched,
    the conflicts, the winner and why, the obligations and what waived them."""
    from console.policy.explain import explain_text

    request = CheckRequest(tool, command, args, agent, team, data, backend, run, interrupt, reason)
    full, decision = check_policy(ctx, request, url, token, context)
    prose = explain_text(decision, full)
    document = {**decision.model_dump(mode="json"), "text": prose}

    def text() -> None:
        for line in prose.splitlines():
            print_text(esc(line))

    emit(output, document, text)


policy_app.command("check", cls=IrqCommand)(check_command)
policy_app.command("explain", cls=IrqCommand)(explain_command)


# ------------------------------------------------------------------------------ irq policy test


@policy_app.command("test", cls=IrqCommand)
def test_command(
    file: Annotated[
        Path,
        typer.Argument(
            help='A TOML file of cases: policy = "PATH" (relative to the file) and [[cases]] '
            "with name, invocation, expect_outcome and optionally expect_winner, "
            "expect_rules, expect_obligations, expect_waived.",
            metavar="FILE",
            show_default=False,
        ),
    ],
    output: OutputOption = OutputFormat.TEXT,
) -> None:
    """Run a file of policy cases locally (no gateway), like `opa test`: PASS or FAIL per
    case with the reason; exit 1 when a case fails, 2 when the file or its policy is invalid."""
    from console.policy.cases import run_cases
    from console.policy.loader import PolicyError

    try:
        report = run_cases(file)
    except PolicyError as exc:
        fail(ExitCode.USAGE, str(exc))
    except OSError as exc:
        fail(ExitCode.USAGE, f"cannot read {file}: {exc.strerror or exc}")

    def text() -> None:
        for case in report.cases:
            if case.passed:
                print_text(f"[green]PASS[/]  {esc(case.name)}")
            else:
                reason = case.reason or "did not meet its expectations"
                print_text(f"[bold red]FAIL[/]  {esc(case.name)}: {esc(reason)}")
        under = f" (policy {report.policy} {report.policy_version or ''})".replace(" )", ")")
        print_text(f"[bold]{report.passed} passed, {report.failed} failed[/]{esc(under)}")

    emit(output, report.model_dump(mode="json"), text)
    if not report.cases:
        hint(f"{file} holds no [[cases]]")
    if report.failed:
        raise typer.Exit(int(ExitCode.FAILED))


# ---------------------------------------------------------------------------- irq policy reload


@policy_app.command("reload", cls=IrqCommand)
def reload_command(
    ctx: typer.Context,
    reason: ReasonOption = "",
    yes: YesOption = False,
    key: KeyOption = None,
    output: OutputOption = OutputFormat.TEXT,
    url: UrlOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
) -> None:
    """Reload the gateway's policy file now (admin). An invalid file keeps the policy in force
    and the result says which rule and key are wrong."""
    conn = connection_of(ctx, url, token, context)
    refuse_unconfirmable(conn, "reload the policy", yes=yes, dry_run=False)

    async def current(client: GatewayClient) -> dict[str, Any]:
        data = await client.query("policy")
        return data if isinstance(data, dict) else {}

    if not yes:
        before = with_gateway(conn, current)
        console = stderr_console()
        console.print(f"[bold]reload[/] the policy from {esc(before.get('source') or '(no file)')}")
        console.print(f"  [dim]in force[/] {esc(before.get('version') or 'none')}")
        ask_or_stop("reload the policy?")

    async def act(client: GatewayClient) -> tuple[list[CommandResult], dict[str, Any]]:
        results = await client.named_command("policy_reload", ["policy"], reason=reason, key=key)
        return results, await current(client)

    results, after = with_gateway(conn, act)
    code = print_policy_results(results, output)
    if output is OutputFormat.TEXT and code is ExitCode.OK:
        rules = ((after.get("policy") or {}).get("rules")) or []
        hint(f"policy in force: {after.get('version') or 'none'} ({len(rules)} rules)")
        suggest(["irq policy show"])
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))
