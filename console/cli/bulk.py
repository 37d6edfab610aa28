"""``--filter EXPR``: run actions and interrupt decisions on every item a filter selects,
as a durable job the gateway drives.

The filter is the TUI's ``/`` grammar (:mod:`console.run_filter`). Actions select runs
(terminal runs only when a ``state:`` term asks for them); decisions select pending
interrupts (inbox items). The command lists every target and the combined plan (kept,
released, at risk, what re-runs, per backend), asks once (default No; ``--yes`` skips,
``--dry-run`` only shows, no terminal and no ``--yes`` refuses with exit 2). ``--max N``
(default 50) is a confirmation threshold: above it the operator types the count to confirm;
with ``--yes`` a larger selection is refused (exit 2) unless ``--max`` is raised.

The confirmed targets are then fixed and handed to the gateway as one job
(console/cli/bulk_jobs.py; console/gateway/job_driver.py): recorded in its journal, sent one
command per target at ``--rate N/s`` (default: the gateway's ``job_rate_per_s``), surviving
the CLI's disconnect and a gateway restart. The CLI follows the job to its end and prints a
per-item result table (ctrl-c leaves the job running: ``irq jobs show ID``); ``--detach``
returns once the job is recorded (its JSON with ``-o json``); ``--wait`` also waits for each
applied target's effect.

Exit code (following the job): 0 when every item applied (and, with ``--wait``, showed its
effect); otherwise the code all failed items share (e.g. 4 when every failure was a conflict;
targets a cancelled job never sent count as failed), 1 when they differ; a ``--wait`` that
timed out exits 7 when every command applied. ``--detach``: 0 once the job is recorded.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from console.cli.answers import answer_dict
from console.cli.bulk_jobs import JobRequest
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
    in_place_marks,
    print_waits,
    run_mark,
    wait_for_effects,
)

if TYPE_CHECKING:
    from rich.console import Console

    from console.client import FleetView, GatewayClient
    from console.config import Connection
    from console.model import CommandResult, Decision, Interrupt, Run

#: the confirmation threshold: above it the operator types the count (--yes refuses)
DEFAULT_MAX = 50
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
        part = answer_dict(await client.query(
            "plan", action=action, targets=targets[start : start + PLAN_PART]),
            f"to a {action} plan query")
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


# ---------------------------------------------------------------------- the job


def confirm_selection(count: int, max_n: int, noun: str, question: str) -> None:
    """Ask once (default No). Above ``--max`` the operator types the count instead: the
    threshold of a stronger confirmation, not a wall (with --yes it still refuses)."""
    from console.cli.confirm import ask_or_stop

    if count <= max_n:
        ask_or_stop(question)
        return
    stderr_console().print(
        f"[bold red]{count} {noun}[/] is more than the confirmation threshold (--max {max_n})")
    typed = typer.prompt(f"{question} Type {count} to confirm", default="", err=True,
                         show_default=False)
    if typed.strip() != str(count):
        hint("nothing done")
        raise typer.Exit(int(ExitCode.FAILED))


def run_job(
    conn: Connection, req: JobRequest, *, wait_s: float | None, detach: bool
) -> tuple[list[CommandResult], list[Waited] | None, dict[str, Any]]:
    """One connection (subscribed when waiting): create the job, follow it to its end
    (unless ``detach``), then wait for the effects of the applied targets (``wait_s``): a
    retry's on the run that carries the work on (the new run of a fork)."""
    from console.cli.bulk_jobs import create_job, follow_job, interrupted, job_results
    from console.cli.session import with_gateway

    async def go(client: GatewayClient) -> tuple[list[CommandResult], list[Waited] | None,
                                                 dict[str, Any]]:
        # a run retried in place (a Temporal reset keeps its id) shows its failed state
        # until the reset reaches the view: that state is not the retry's outcome
        before = {t: run_mark(r) for t in req.targets if (r := client.view.runs.get(t))} \
            if wait_s is not None and req.action == "retry" else {}
        job_id = await create_job(client, req)
        if detach:
            return [], None, await client.query("job", job_id=job_id)
        job = await follow_job(client, job_id)
        results = job_results(job, req.action)
        if wait_s is None:
            return results, None, job
        carriers = [r.new_run_id or r.target for r in results if r.outcome == "applied"]
        return results, await wait_for_effects(client, req.action, carriers, wait_s,
                                               seen_before=in_place_marks(results, before)), job

    try:
        return with_gateway(conn, go, subscribe=wait_s is not None and not detach)
    except KeyboardInterrupt:
        interrupted(req)
        raise


def print_detached(job: dict[str, Any], output: OutputFormat) -> None:
    emit(output, job, lambda: None)
    if output is OutputFormat.TEXT:
        suggest([f"irq jobs show {job['id']}", f"irq jobs cancel {job['id']}"])


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
    rate_per_s: float | None = None,
    detach: bool = False,
) -> None:
    from console.cli.confirm import refuse_unconfirmable
    from console.cli.session import with_gateway

    refuse_unconfirmable(conn, f"{action} runs", yes=yes, dry_run=dry_run)

    async def select(client: GatewayClient) -> RunSelection:
        runs = select_runs(client.view, expr)
        refuse_empty(len(runs), "runs", expr, "irq runs")
        if yes or dry_run:
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
        confirm_selection(len(sel.targets), max_n, "runs", f"{action} these "
                          f"{len(sel.targets)} run(s)?")
    req = JobRequest(action, sel.targets, expr, reason, key, rate_per_s)
    results, waited, job = run_job(conn, req, wait_s=wait_s, detach=detach)
    if detach:
        print_detached(job, output)
        return
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
    rate_per_s: float | None = None,
    detach: bool = False,
) -> None:
    """Send ``decision`` to every pending interrupt ``expr`` selects (each must allow it;
    ``merge_args`` lays an edit's arguments over each one's proposed arguments)."""
    from console.cli.confirm import refuse_unconfirmable
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
        if yes or dry_run:
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
        confirm_selection(len(targets), max_n, "interrupts",
                          f"{kind} these {len(targets)} interrupt(s)?")
    from console.model import Action

    req = JobRequest(Action.DECIDE.value, targets, expr, reason, key, rate_per_s,
                     decision=decision, merge_args=merge_args)
    results, waited, job = run_job(conn, req, wait_s=wait_s, detach=detach)
    if detach:
        print_detached(job, output)
        return
    finish("decide", results, waited, output, ["irq inbox"])
