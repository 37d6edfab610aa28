"""The sections of the run detail screen as Rich renderables (pure, testable)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.leak_rule import leak_reason
from console.model import AuditEntry, Interrupt, JournalStep, Run, RunState
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.state_display import (
    STATE_LABEL,
    STATE_TONE,
    GlyphSet,
    format_age,
    progress_bar,
    progress_percent,
)
from console.tui.widgets.summary_line import TONE_STYLE


def _ts(at: datetime | None) -> str:
    return at.strftime("%H:%M:%S") if at else "-"


def state_text(state: RunState, g: GlyphSet) -> Text:
    return Text(f"{g.states[state]} {STATE_LABEL[state]}", style=TONE_STYLE[STATE_TONE[state]])


def summary(run: Run, state: RunState, now: datetime, g: GlyphSet) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    state_line = state_text(state, g)
    suspected = run.suspected_state(now, state)
    seen = run.observed_age_s(now)
    if suspected is not None:
        state_line.append("?", style=TONE_STYLE[STATE_TONE[suspected]])
    if seen is not None:
        state_line.append(f"  as of {format_age(seen, g.none)} ago")
    if suspected is not None:
        past = (f"past its {run.heartbeat_timeout_s:g}s timeout"
                if suspected is RunState.LOST and run.heartbeat_timeout_s else "past its cadence")
        state_line.append(
            f"  no heartbeat for {format_age(run.heartbeat_age_s(now), g.none)}, {past}: "
            f"{suspected.value}? (the backend has not said so yet)",
            style=TONE_STYLE[STATE_TONE[suspected]])
    if run.native_state:
        state_line.append(f"   native: {terminal_safe(run.native_state)}", style="dim")
    if run.preempted:
        state_line.append("   preempted (not a failure: intent still valid)", style="cyan")
    grid.add_row("run", inert(run.id, "bold"))  # agent text: plain, inert (terminal_text.py)
    if run.name:
        grid.add_row("name", inert(run.name))
    grid.add_row("state", state_line)
    if run.error is not None:  # failed or given up: what the engine recorded, where
        failure = inert(run.error.type or "error", "bold red")
        if run.error.step:
            failure.append(" in step ", style="red")
            failure.append_text(inert(run.error.step, "red"))
        failure.append(": ")
        failure.append_text(inert(run.error.message))
        grid.add_row("error", failure)
    age = run.heartbeat_age_s(now)
    beat = Text(f"{format_age(age, g.none)} ago" if age is not None else "no heartbeat")
    cadence = []
    if run.heartbeat_interval_s:
        cadence.append(f"every {run.heartbeat_interval_s:g}s")
    cadence.append(f"timeout {run.heartbeat_timeout_s:g}s" if run.heartbeat_timeout_s
                   else "no timeout")
    beat.append("  (" + ", ".join(cadence) + ")", style="dim")
    grid.add_row("heartbeat", beat)
    if run.progress is not None:
        grid.add_row("progress", f"{progress_bar(run.progress, 20, g)} "
                                 f"{progress_percent(run.progress)}")
    if run.in_flight_step:
        grid.add_row("in flight", inert(run.in_flight_step, "yellow"))
    extras = []
    if run.started_at:
        extras.append(f"started {_ts(run.started_at)}")
    if run.attempt is not None:
        extras.append(f"attempt {run.attempt}")
    extras.append(f"updated {format_age((now - run.updated_at).total_seconds(), g.none)} ago")
    grid.add_row("", Text(f" {g.separator} ".join(extras), style="dim"))
    return grid


def timeline(entries: Sequence[tuple[datetime, str, str]], g: GlyphSet) -> RenderableType:
    """(at, what, style) oldest first, shown newest last."""
    if not entries:
        return Text("no state changes seen yet", style="dim")
    text = Text()
    for at, what, style in entries[-12:]:
        text.append(f"{_ts(at)} ", style="dim")
        text.append(terminal_safe(what) + "\n", style=style)
    text.rstrip()
    return text


def resources(run: Run, g: GlyphSet) -> RenderableType:
    if not run.resources:
        return Text("holds no reported resources", style="dim")
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    for col in ("RESOURCE", "KIND", "ON PAUSE", "ON CANCEL", "STATE"):
        table.add_column(col, no_wrap=col != "RESOURCE", overflow="fold")
    for r in run.resources:
        leaked = leak_reason(r.state, run.state.value)
        state_style = "bold red" if leaked else ("dim" if r.state == "released" else "")
        state = {"no_release_report": "LEAK?", "run_ended": "LEAK? (run ended)"}.get(
            leaked or "", r.state)
        table.add_row(inert(r.id), inert(r.kind),
                      Text(r.on_pause, style="green" if r.on_pause == "keep" else "yellow"),
                      Text(r.on_cancel, style="yellow" if r.on_cancel == "keep" else ""),
                      Text(state, style=state_style))
    return table


def journal(steps: Iterable[JournalStep], g: GlyphSet) -> RenderableType:
    steps = list(steps)
    if not steps:
        return Text("no journal steps reported", style="dim")
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("STEP", overflow="fold")
    table.add_column("STATUS", no_wrap=True)
    table.add_column("STARTED", no_wrap=True)
    table.add_column("DONE", no_wrap=True)
    for step in steps[-40:]:
        if step.status == "completed":
            status = Text(f"{g.states[RunState.COMPLETED]} done {g.separator} journaled",
                          style="green")
        elif step.status == "in_flight":
            status = Text(f"{g.states[RunState.RUNNING]} in flight: re-runs on resume",
                          style="bold yellow")
        else:
            status = Text(f"{g.states[RunState.FAILED]} failed", style="bold red")
        table.add_row(str(step.index), inert(step.name), status, _ts(step.started_at),
                      _ts(step.completed_at))
    return table


def interrupts(items: Iterable[Interrupt], now: datetime, g: GlyphSet) -> RenderableType:
    items = list(items)
    if not items:
        return Text("no interrupts", style="dim")
    text = Text()
    for intr in items:
        if intr.status == "pending":
            text.append(f"{g.interrupt} pending ", style="bold magenta")
            text.append(f"{format_age((now - intr.created_at).total_seconds())} ")
        else:
            text.append(f"  {intr.status} ", style="dim")
            if intr.decision:
                text.append(f"{intr.decision.kind.value} by {terminal_safe(intr.decision.by)} ",
                            style="dim")
        text.append(terminal_safe(intr.title or intr.native_id),
                    style="bold" if intr.status == "pending" else "dim")
        if intr.action:
            text.append(f"  {terminal_safe(intr.action)}", style="dim")
        text.append("\n")
    text.rstrip()
    return text


def warnings(run: Run, notes: Sequence[str], g: GlyphSet) -> RenderableType:
    text = Text()
    if not run.warnings:
        text.append(f"{g.ok} no recoverability warnings\n", style="green")
    for w in run.warnings:
        text.append(f"{g.stale} {terminal_safe(w)}\n", style="bold yellow")
    for n in notes:
        text.append(f"{g.bullet} {terminal_safe(n)}\n", style="dim")
    text.rstrip()
    return text


def audit(entries: Iterable[AuditEntry], g: GlyphSet, *, target: bool = False) -> RenderableType:
    entries = list(entries)
    if not entries:
        return Text("no commands recorded for this run", style="dim")
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    table.add_column("AT", no_wrap=True)
    table.add_column("WHO", no_wrap=True)
    table.add_column("ACTION", no_wrap=True)
    if target:
        table.add_column("TARGET", overflow="fold")
    table.add_column("OUTCOME", no_wrap=True)
    table.add_column("REASON", overflow="fold")
    for e in entries[-30:]:
        style = "green" if e.outcome == "applied" else "red"
        row: list[Any] = [_ts(e.at), inert(e.identity), inert(e.action)]
        if target:
            row.append(inert(e.target))
        row += [inert(e.outcome, style), inert(e.reason) if e.reason else Text("-", style="dim")]
        table.add_row(*row)
    return table


class RunPolicyDecision(BaseModel):
    """One entry of the ``run`` query's ``policy_decisions``: a tool call the policy judged."""

    model_config = ConfigDict(extra="ignore")

    at: datetime | None = None
    call_id: str = ""
    tool: str = ""
    outcome: str = ""
    winner: str | None = None
    rules: list[str] = Field(default_factory=list)
    policy_version: str | None = None
    explanation: list[str] = Field(default_factory=list)


OUTCOME_LABEL = {"require_approval": "approval"}
OUTCOME_STYLE = {"permit": "green", "prohibit": "bold red", "require_approval": "yellow"}


def parse_policy_decisions(raw: object) -> list[RunPolicyDecision]:
    """The valid entries of ``raw`` (a malformed one is skipped, never the whole list)."""
    out: list[RunPolicyDecision] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append(RunPolicyDecision.model_validate(item))
        except ValidationError:
            continue
    return out


def policy_decisions(items: Sequence[RunPolicyDecision], g: GlyphSet) -> RenderableType:
    """Time, tool, outcome and the rule that won (``default``: no rule decided)."""
    if not items:
        return Text("no policy decisions recorded for this run", style="dim")
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    table.add_column("AT", no_wrap=True)
    table.add_column("TOOL", overflow="fold")
    table.add_column("OUTCOME", no_wrap=True)
    table.add_column("WINNER", overflow="fold")
    for d in items[-30:]:
        table.add_row(_ts(d.at), inert(d.tool or g.none),
                      inert(OUTCOME_LABEL.get(d.outcome, d.outcome or g.none),
                            OUTCOME_STYLE.get(d.outcome, "")),
                      inert(d.winner) if d.winner else Text("default", style="dim"))
    return table


def section(title: str, body: RenderableType) -> RenderableType:
    return Group(Text(title, style="bold underline"), body, Text(""))
