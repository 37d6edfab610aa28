"""``--filter EXPR``: run actions and interrupt decisions on every item a filter selects.

The filter is the TUI's ``/`` grammar (:mod:`console.run_filter`). Actions select runs
(terminal runs only when a ``state:`` term asks for them); decisions select pending
interrupts (inbox items). The command lists every target and the combined plan (kept,
released, at risk, what re-runs, per backend), asks once (default No; ``--yes`` skips,
``--dry-run`` only shows, no terminal and no ``--yes`` refuses with exit 2), then sends the
commands with bounded concurrency -- run actions in commands of at most 50 targets,
decisions one per command (the gateway decides one interrupt per command), at most 8 in
flight and under the gateway's per-identity command budget -- and prints a per-item result
table. ``--max N`` (default 50) refuses a larger selection (exit 2).

Exit code: 0 when every item applied (and, with ``--wait``, showed its effect); otherwise
the code all failed items share (e.g. 4 when every failure was a conflict), 1 when they
differ; a ``--wait`` that timed out exits 7 when every command applied.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from console.cli.exits import ExitCode, fail
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    hint,
    make_table,
    stderr_console,
    stdout_console,
    styled,
    suggest,
)
from console.cli.results import print_results, render_plan
from console.cli.wait import (
    Waited,
    code_for_waits,
    print_waits,
    wait_for_effects,
)

if TYPE_CHECKING:
    from rich.console import Console

    from console.client import FleetView, GatewayClient
    from console.config import Connection
    from console.model import CommandResult, Decision, Interrupt, Run

DEFAULT_MAX = 50
CHUNK_TARGETS = 50  # targets per run-action command (the gateway takes up to 1,000)
IN_FLIGHT = 8  # commands in flight at once
COMMANDS_PER_S = 8.0  # under the gateway's default per-identity budget (10/s, burst 100)
COMMAND_BURST = 50
RATE_LIMIT_RETRIES = 5
PLAN_PART = 1000  # targets of one plan query (the gateway's limit per frame)



def refuse_ids_and_filter(ids: list[str], expr: str | None, noun: str) -> None:
    if ids and expr is not None:
        fail(ExitCode.USAGE, f"give {noun} ids or --filter, not both")
    if not ids and expr is None:
        fail(ExitCode.USAGE, f"give one or more {noun} ids, or --filter EXPR")
    if expr is not None and not expr.strip():
        fail(ExitCode.USAGE, "--filter needs an expression (e.g. 'backend:dbos has:gpu')")


# ------------------------------------------------------------------------------ selection


def select_runs(view: FleetView, expr: str) -> list[Run]:
    """The runs ``expr`` selects, by id; terminal runs only when a ``state:`` term admits
    them (nothing can be done to a finished run otherwise)."""
    from console.model import utcnow
    from console.run_filter import FilterQuery

    query = FilterQuery.parse(expr)
    admitted = query.states()
    now = utcnow()
    return sorted(
        (
            run
            for run in view.runs.values()
            if (not run.state.terminal or (admitted is not None and run.state in admitted))
            and query.matches(run, run.state, now=now)
        ),
        key=lambda r: r.id,
    )


def select_interrupts(view: FleetView, expr: str) -> list[Interrupt]:
    """The pending interrupts ``expr`` selects, oldest first."""
    from console.model import utcnow
    from console.run_filter import FilterQuery

    query = FilterQuery.parse(expr)
    now = utcnow()
    return [
        intr
        for intr in view.pending_interrupts()
        if query.matches_interrupt(intr, view.runs.get(intr.run_id), now=now)
    ]


def refuse_over_cap(count: int, max_n: int, noun: str, expr: str) -> None:
    if count > max_n:
        fail(
            ExitCode.USAGE,
            f"the filter {expr!r} selects {count} {noun}, more than --max {max_n}: nothing done",
            hint=f"raise the cap with --max {count} to act on all of them, or narrow the filter",
        )


def refuse_empty(count: int, noun: str, expr: str, list_command: str) -> None:
    if count == 0:
        fail(
            ExitCode.NOT_FOUND,
            f"the filter {expr!r} selects no {noun}: nothing to do",
            hint=f"check it with `{list_command}`",
        )


# ----------------------------------------------------------------------------- the plan


async def combined_plan(client: GatewayClient, action: str, targets: list[str]) -> dict[str, Any]:
    """The gateway's ``plan`` for all targets (queried in parts of up to 1,000)."""
    merged: dict[str, Any] = {"action": action, "targets": []}
    for start in range(0, len(targets), PLAN_PART):
        part = await client.query("plan", action=action, targets=targets[start : start + PLAN_PART])
        if not isinstance(part, dict):
            fail(ExitCode.FAILED, f"the gateway answered nonsense to a {action} plan query")
        for key, value in part.items():
            if isinstance(value, list):
                merged.setdefault(key, [])
                merged[key] = [*merged[key], *value]
            else:
                merged.setdefault(key, value)
    return merged


def per_backend(plan: dict[str, Any], runs: dict[str, Run]) -> list[tuple[str, int, int, int, int]]:
    """(backend:context, runs, kept, released, at risk) rows of a combined plan."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    def scope(run_id: str) -> str:
        run = runs.get(run_id)
        if run is not None:
            return f"{run.backend}:{run.context}"
        return run_id.partition("/")[0]

    for target in plan.get("targets") or []:
        counts[scope(target)][0] += 1
    for index, key in enumerate(("resources_kept", "resources_released", "resources_at_risk")):
        for item in plan.get(key) or []:
            counts[scope(str(item.get("run_id", "")))][index + 1] += 1
    return [(k, *v) for k, v in sorted(counts.items())]  # type: ignore[misc]


def render_run_selection(
    expr: str, plan: dict[str, Any], runs: dict[str, Run], console: Console
) -> None:
    console.print(f"[bold]filter[/] {esc(expr)}")
    render_plan(plan, console, runs={rid: run.contract() for rid, run in runs.items()})
    rows = per_backend(plan, runs)
    if rows:
        console.print("[bold]per backend:[/]")
        for scope, count, kept, released, at_risk in rows:
            risk = f"[bold red]{at_risk} at risk[/]" if at_risk else "0 at risk"
            console.print(
                f"  {esc(scope)}: {count} run(s), {kept} kept, {released} released, {risk}"
            )


def render_interrupt_selection(
    expr: str, interrupts: list[Interrupt], view: FleetView, kind: str, console: Console
) -> None:
    from console.cli.output import fmt_age
    from console.model import age_seconds, utcnow

    console.print(f"[bold]filter[/] {esc(expr)}")
    console.print(f"[bold]{esc(kind)}[/] {len(interrupts)} interrupt(s):")
    table = make_table("interrupt", "run", "tool", "title", "age")
    now = utcnow()
    for intr in interrupts:
        run = view.runs.get(intr.run_id)
        table.add_row(
            esc(intr.id),
            f"{esc(run.name) if run else ''} {styled(run.state.value) if run else ''}".strip(),
            esc(intr.action or "-"),
            esc(intr.title),
            fmt_age(age_seconds(intr.created_at, now)),
        )
    console.print(table)


# ----------------------------------------------------------------------------- sending


@dataclass
class _Pacer:
    """A client-side token bucket: stay under the gateway's per-identity command budget."""

    rate: float = COMMANDS_PER_S
    burst: float = COMMAND_BURST
    tokens: float = COMMAND_BURST
    last: float = field(default=0.0)

    async def take(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self.last:
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)


async def send_in_chunks(
    client: GatewayClient,
    action: str,
    targets: list[str],
    *,
    reason: str,
    key: str | None,
    decisions: dict[str, Decision] | None = None,
) -> list[CommandResult]:
    """Send ``action`` for every target: run actions in commands of <= 50 targets, decisions
    one per command; at most 8 in flight, paced under the command budget; a command the
    gateway rate-limits is sent again after a pause. Results in target order."""
    import asyncio

    from console.client import GatewayError
    from console.model import CommandResult

    size = 1 if decisions is not None else CHUNK_TARGETS
    chunks = [targets[i : i + size] for i in range(0, len(targets), size)]
    gate = asyncio.Semaphore(IN_FLIGHT)
    pacer = _Pacer()

    async def one(index: int, chunk: list[str]) -> list[CommandResult]:
        chunk_key = f"{key}-{index}" if key else None
        async with gate:
            for attempt in range(RATE_LIMIT_RETRIES + 1):
                await pacer.take()
                try:
                    return await client.command(
                        action,
                        chunk,
                        reason=reason,
                        key=chunk_key,
                        decision=decisions[chunk[0]] if decisions is not None else None,
                    )
                except GatewayError as exc:
                    if exc.code == "rate_limited" and attempt < RATE_LIMIT_RETRIES:
                        await asyncio.sleep(1.0 + attempt)
                        continue
                    return [
                        CommandResult(
                            id=chunk_key or "",
                            action=action,
                            target=t,
                            outcome="failed",
                            error=exc.code,
                            detail=exc.message,
                        )
                        for t in chunk
                    ]
        return []  # not reached: the loop returns

    parts = await asyncio.gather(*(one(i, c) for i, c in enumerate(chunks)))
    by_target = {r.target: r for part in parts for r in part}
    return [by_target[t] for t in targets if t in by_target]


# ------------------------------------------------------------------------------- finish


def finish(
    action: str,
    results: list[CommandResult],
    waited: list[Waited] | None,
    output: OutputFormat,
    next_steps: list[str],
) -> None:
    """Print the per-item results (and what --wait observed), suggest, exit with the code."""
    from console.cli.exits import code_for_results

    if waited is not None and output is not OutputFormat.TEXT:
        emit(
            output,
            {
                "results": [r.contract() for r in results],
                "waited": [w.contract() for w in waited],
            },
            lambda: None,
        )
        code = code_for_results(results)
    else:
        code = print_results(results, output)
        if waited is not None:
            print_waits(waited, output)
    if code is ExitCode.OK and waited is not None:
        code = code_for_waits(waited)
        if code is not ExitCode.OK and output is OutputFormat.TEXT:
            short = [w for w in waited if not w.ok]
            hint(
                f"{len(short)} of {len(waited)} did not show the {action}'s effect in time"
                if code is ExitCode.TIMED_OUT
                else f"{len(short)} of {len(waited)} did not reach the {action}'s effect"
            )
    if output is OutputFormat.TEXT:
        suggest(next_steps)
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


async def act_and_wait(
    client: GatewayClient,
    action: str,
    targets: list[str],
    *,
    reason: str,
    key: str | None,
    wait_s: float | None,
    decisions: dict[str, Decision] | None = None,
) -> tuple[list[CommandResult], list[Waited] | None]:
    results = await send_in_chunks(
        client, action, targets, reason=reason, key=key, decisions=decisions
    )
    if wait_s is None:
        return results, None
    applied = [r.target for r in results if r.outcome == "applied"]
    return results, await wait_for_effects(client, action, applied, wait_s)


def run_session(
    conn: Connection,
    action: str,
    targets: list[str],
    *,
    reason: str,
    key: str | None,
    wait_s: float | None,
    decisions: dict[str, Decision] | None = None,
) -> tuple[list[CommandResult], list[Waited] | None]:
    """One connection (subscribed when waiting): send, then wait for the effects."""
    from console.cli.session import with_gateway

    return with_gateway(
        conn,
        lambda c: act_and_wait(
            c, action, targets, reason=reason, key=key, wait_s=wait_s, decisions=decisions
        ),
        subscribe=wait_s is not None,
    )


# ------------------------------------------------------------------------------ actions


@dataclass
class RunSelection:
    targets: list[str]
    runs: dict[str, Run]
    plan: dict[str, Any]


def bulk_action(
    conn: Connection,
    action: str,
    expr: str,
    *,
    reason: str,
    yes: bool,
    dry_run: bool,
    key: str | None,
    output: OutputFormat,
    max_n: int,
    wait_s: float | None,
) -> None:
    from console.cli.confirm import ask_or_stop, refuse_unconfirmable
    from console.cli.session import with_gateway

    refuse_unconfirmable(conn, f"{action} runs", yes=yes, dry_run=dry_run)

    async def select(client: GatewayClient) -> RunSelection:
        runs = select_runs(client.view, expr)
        refuse_empty(len(runs), "runs", expr, "irq runs")
        refuse_over_cap(len(runs), max_n, "runs", expr)
        targets = [r.id for r in runs]
        plan = await combined_plan(client, action, targets)
        return RunSelection(targets, {r.id: r for r in runs}, plan)

    sel = with_gateway(conn, select)
    if dry_run:
        emit(
            output,
            sel.plan,
            lambda: render_run_selection(expr, sel.plan, sel.runs, stdout_console()),
        )
        if output is OutputFormat.TEXT:
            suggest([f"irq {action} --filter {expr!r} --reason TEXT"])
        return
    if output is OutputFormat.TEXT or not yes:
        render_run_selection(expr, sel.plan, sel.runs, stderr_console())
    if not yes:
        ask_or_stop(f"{action} these {len(sel.targets)} run(s)?")
    results, waited = run_session(conn, action, sel.targets, reason=reason, key=key, wait_s=wait_s)
    next_steps = {
        "pause": [f"irq resume --filter {expr!r}", "irq runs --state paused"],
        "resume": ["irq runs"],
    }.get(action, ["irq audit", "irq runs"])
    finish(action, results, waited, output, next_steps)


# ---------------------------------------------------------------------------- decisions


def _allows(interrupt: Interrupt, decision: Decision) -> bool:
    """Whether ``interrupt`` takes ``decision``'s kind: the one rule
    (``console.decision_check.kind_problem``), shown before asking; the gateway checks it
    again (the arguments too) when each decision arrives."""
    from console.decision_check import kind_problem

    allowed = [d.value for d in interrupt.allowed_decisions]
    return kind_problem(decision.kind.value, allowed) is None


def bulk_decide(
    conn: Connection,
    expr: str,
    decision: Decision,
    *,
    reason: str,
    yes: bool,
    dry_run: bool,
    key: str | None,
    output: OutputFormat,
    max_n: int,
    wait_s: float | None,
    merge_args: bool = False,
) -> None:
    """Send ``decision`` to every pending interrupt ``expr`` selects (each must allow it;
    ``merge_args`` lays an edit's arguments over each one's proposed arguments)."""
    from console.cli.confirm import ask_or_stop, refuse_unconfirmable
    from console.cli.session import with_gateway

    kind = decision.kind.value
    refuse_unconfirmable(conn, f"{kind} interrupts", yes=yes, dry_run=dry_run)

    @dataclass
    class Selected:
        interrupts: list[Interrupt]
        view: FleetView

    async def select(client: GatewayClient) -> Selected:
        found = select_interrupts(client.view, expr)
        refuse_empty(len(found), "pending interrupts", expr, "irq inbox")
        refuse_over_cap(len(found), max_n, "pending interrupts", expr)
        return Selected(found, client.view)

    sel = with_gateway(conn, select)
    refused = [i for i in sel.interrupts if not _allows(i, decision)]
    if refused:
        shown = ", ".join(i.id for i in refused[:10]) + (" …" if len(refused) > 10 else "")
        fail(
            ExitCode.USAGE,
            f"{len(refused)} selected interrupt(s) do not allow '{kind}': {shown}",
            hint="narrow the filter (e.g. with tool:) so every selected interrupt allows it",
        )
    decisions: dict[str, Decision] = {}
    for intr in sel.interrupts:
        if merge_args:
            merged = {**intr.args, **(decision.args or {})}
            decisions[intr.id] = decision.model_copy(update={"args": merged})
        else:
            decisions[intr.id] = decision
    targets = [i.id for i in sel.interrupts]

    def contracts() -> list[dict[str, Any]]:
        out = []
        for intr in sel.interrupts:
            d = decisions[intr.id]
            body: dict[str, Any] = {"kind": kind}
            body.update({k: v for k, v in d.payload().items() if k != "type"})
            out.append(
                {
                    "action": "decide",
                    "target": intr.id,
                    "decision": body,
                    "reason": reason,
                    "interrupt": intr.contract(),
                }
            )
        return out

    def show(console: Console) -> None:
        render_interrupt_selection(expr, sel.interrupts, sel.view, kind, console)
        detail = {
            "reject": f"feedback: {decision.feedback or ''}",
            "respond": f"response: {decision.response!r}",
            "edit": f"arguments{' (merged)' if merge_args else ''}: {decision.args!r}",
        }.get(kind)
        if detail:
            console.print(f"  [dim]{esc(detail)}[/]")
        console.print(f"  [dim]reason[/] {esc(reason) if reason else '[dim]none[/]'}")

    if dry_run:
        emit(output, contracts(), lambda: show(stdout_console()))
        return
    if output is OutputFormat.TEXT or not yes:
        show(stderr_console())
    if not yes:
        ask_or_stop(f"{kind} these {len(targets)} interrupt(s)?")
    from console.model import Action

    results, waited = run_session(
        conn,
        Action.DECIDE.value,
        targets,
        reason=reason,
        key=key,
        wait_s=wait_s,
        decisions=decisions,
    )
    finish("decide", results, waited, output, ["irq inbox"])
