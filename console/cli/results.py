"""Rendering action plans and per-item command results (shared by actions and decisions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from console.cli.exits import ExitCode, code_for_result, code_for_results
from console.cli.output import (
    OutputFormat,
    emit,
    esc,
    make_table,
    styled,
)

if TYPE_CHECKING:
    from rich.console import Console

    from console.model import CommandResult


def _resource_list(items: list[dict[str, Any]], *, with_run: bool) -> list[str]:
    out = []
    for r in items:
        label = f"{r.get('kind', 'resource')} {r.get('id', '?')}"
        if with_run:
            label += f"  ({r.get('run_id', '?')})"
        out.append(label)
    return out


def render_plan(
    plan: dict[str, Any],
    console: Console,
    *,
    runs: dict[str, dict[str, Any]] | None = None,
) -> None:
    """The plan in operator words: targets, operations, kept, released, at risk, warnings."""
    action = str(plan.get("action", "?"))
    targets: list[str] = list(plan.get("targets") or [])
    many = len(targets) > 1
    noun = "runs" if many else "run"
    console.print(f"[bold]{esc(action)}[/] {len(targets)} {noun}:")
    for target in targets:
        info = (runs or {}).get(target)
        extra = ""
        if info:
            name = info.get("name") or ""
            extra = f"  [dim]{esc(name)}[/] {styled(str(info.get('state', '')))}".rstrip()
        console.print(f"  {esc(target)}{extra}")

    sections: list[tuple[str, list[str], str]] = [
        ("operations", [str(o) for o in plan.get("operations") or []], ""),
        (
            "resources kept",
            _resource_list(plan.get("resources_kept") or [], with_run=many),
            "green",
        ),
        (
            "resources released",
            _resource_list(plan.get("resources_released") or [], with_run=many),
            "cyan",
        ),
        (
            "resources at risk (may leak)",
            _resource_list(plan.get("resources_at_risk") or [], with_run=many),
            "bold red",
        ),
        ("steps kept (journaled results reused)", [str(s) for s in plan.get("steps_kept") or []],
         "green"),
        (
            "runs again" if action == "retry" else "re-runs on resume (at-least-once)",
            [str(s) for s in plan.get("will_rerun") or []],
            "yellow",
        ),
        ("side effects that happen twice (not journaled)",
         [str(s) for s in plan.get("unjournaled_effects") or []], "bold red"),
    ]
    for title, lines, style in sections:
        if not lines:
            if title in ("resources kept", "resources released"):
                console.print(f"[bold]{title}:[/] none")
            continue
        console.print(f"[bold]{title}:[/]")
        for line in lines:
            console.print(f"  [{style}]{esc(line)}[/]" if style else f"  {esc(line)}")
    _render_work_at_risk(plan, console, many=many)
    warnings = [str(w) for w in plan.get("warnings") or []]
    if warnings:
        console.print("[bold]warnings:[/]")
        for warning in warnings:
            console.print(f"  [yellow]⚠ {esc(warning)}[/]")


def _for_target(items: list[dict[str, Any]], target: str) -> list[str]:
    return [f"{r.get('kind')} {r.get('id')}" for r in items if r.get("run_id") in (None, target)]


def results_table_rows(result: CommandResult) -> tuple[str, str, str, str, str]:
    plan = result.plan.contract() if result.plan else {}
    kept = ", ".join(_for_target(plan.get("resources_kept") or [], result.target)) or "-"
    released = ", ".join(_for_target(plan.get("resources_released") or [], result.target)) or "-"
    outcome = styled(result.outcome)
    if result.replayed:
        outcome += " [dim](replayed)[/]"
    detail = result.detail or ""
    if result.error and result.error != result.outcome and result.error not in detail:
        detail = f"{result.error}: {detail}" if detail else result.error
    return esc(result.target), outcome, esc(kept), esc(released), esc(detail or "-")


def print_results(results: list[CommandResult], fmt: OutputFormat) -> ExitCode:
    """Per-item result table (text) or the result contracts (json/jsonl); the exit code."""
    contracts = [r.contract() for r in results]

    def text() -> None:
        from console.cli.output import hint, print_table, print_text

        if not results:
            hint("the gateway returned no results")
            return
        table = make_table("target", "outcome", "kept", "released", "detail")
        for result in results:
            table.add_row(*results_table_rows(result))
        print_table(table)
        for result in results:  # four eyes: the approval counts, the decision is not sent yet
            if result.outcome == "recorded":
                print_text(esc(result.detail))
        failed = [r for r in results if code_for_result(r) is not ExitCode.OK]
        if failed and len(results) > 1:
            hint(f"{len(failed)} of {len(results)} not applied")
        if any(r.replayed for r in results):
            hint(
                "replayed: the gateway had already handled this idempotency key; "
                "nothing was sent again"
            )

    emit(fmt, contracts, text)
    return code_for_results(results)


def _render_work_at_risk(plan: dict[str, Any], console: Console, *, many: bool) -> None:
    """``work at risk: 42 min since the last step × 2 gpu = 84 GPU-min ($3.50)`` per run,
    and the resources saved on pause and restored on resume (console/work_at_risk.py)."""
    from console.run_facts import WorkAtRisk
    from console.work_at_risk import describe, snapshot_note

    for item in plan.get("work_at_risk") or []:
        risk = WorkAtRisk.model_validate(item)
        who = f"{risk.run_id}: " if many else ""
        if risk.minutes or risk.gpus or risk.cost:
            console.print(f"[bold]work at risk:[/] [yellow]{esc(who + describe(risk))}[/]")
        note = snapshot_note(risk) if plan.get("action") == "pause" else None
        if note:
            console.print(f"[bold]snapshot:[/] [green]{esc(who + note)}[/]")
