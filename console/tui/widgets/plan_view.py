"""An action plan in operator words: targets, operations, kept, released, at risk, warnings.

``plan_text`` is a pure function (used by the confirm dialog, run detail and the results
dialog); ``PlanView`` is the widget around it.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from console.model import Action, ActionPlan, PlannedResource
from console.terminal_text import terminal_safe
from console.tui.state_display import UNICODE, GlyphSet
from console.work_at_risk import describe, snapshot_note


def _resources(items: list[PlannedResource], many_runs: bool) -> str:
    return ", ".join(
        f"{r.id} ({r.kind})" + (f" of {r.run_id}" if many_runs else "") for r in items
    )


def plan_text(plan: ActionPlan, g: GlyphSet = UNICODE, *, targets: bool = True) -> Text:
    """The plan as styled text; every line starts with a word, not only a colour."""
    out = Text()
    many = len(plan.targets) > 1

    def line(label: str, body: str, style: str = "") -> None:
        out.append(f"{label:<10}", style="bold")
        out.append(terminal_safe(body) + "\n", style=style)  # ids, steps: agents name them

    if targets:
        for i, target in enumerate(plan.targets):
            line("target" if i == 0 else "", target)
    for op in plan.operations:
        line("does", op)
    if plan.resources_kept:
        line("keeps", _resources(plan.resources_kept, many), "green")
    if plan.resources_released:
        line("releases", _resources(plan.resources_released, many), "yellow")
    if plan.resources_at_risk:
        line("at risk", _resources(plan.resources_at_risk, many), "bold red")
    if not (plan.resources_kept or plan.resources_released or plan.resources_at_risk):
        line("resources", "none held")
    for step in plan.steps_kept:
        line("keeps", f"step {step} (journaled result reused)", "green")
    for step in plan.will_rerun:
        if plan.action is Action.RETRY:
            line("re-runs", f"step {step}", "yellow")
        else:
            line("re-runs", f"{step} (in flight: at-least-once)", "yellow")
    for effect in plan.unjournaled_effects:
        line("twice", effect, "bold red")  # side effects outside the journal happen again
    for risk in plan.work_at_risk:
        who = f"{risk.run_id}: " if many else ""
        if risk.minutes or risk.gpus or risk.cost:
            out.append("work at risk: ", style="bold")  # wider than a label: one phrase
            out.append(terminal_safe(who + describe(risk)) + "\n", style="yellow")
        note = snapshot_note(risk) if plan.action is Action.PAUSE else None
        if note:
            line("snapshot", who + note, "green")
    for warning in plan.warnings:
        out.append(f"{g.stale} warning ", style="bold red")
        out.append(terminal_safe(warning) + "\n", style="red")
    out.rstrip()
    return out


class PlanView(Static):
    """Shows one :class:`ActionPlan`."""

    DEFAULT_CSS = """
    PlanView { height: auto; }
    """

    def __init__(
        self, plan: ActionPlan | None, glyphs: GlyphSet = UNICODE, **kwargs: object
    ) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self.show_plan(plan)

    def show_plan(self, plan: ActionPlan | None) -> None:
        self.update(plan_text(plan, self.glyphs) if plan else Text("no plan", style="dim"))
