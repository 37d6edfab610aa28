"""How an interrupt reads: its proposed action in one line, its policy rule, its header and
arguments (the inbox's detail pane and the decision confirm dialog). Agent text is made inert
(``inert_text.py``, ``terminal_text.py``)."""

from __future__ import annotations

import json

from rich.text import Text

from console.model import Interrupt, InterruptPolicy
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.state_display import format_age, truncate


def action_preview(intr: Interrupt, width: int = 60) -> str:
    args = json.dumps(intr.args, separators=(",", ":"), sort_keys=True) if intr.args else ""
    name = terminal_safe(intr.action or "(no action)")
    return truncate(f"{name} {args}".strip(), width)


def approvals_text(policy: InterruptPolicy) -> str:
    """``approvals 1/2: alice`` (four eyes), or "" when one approver decides."""
    if policy.approvers < 2:
        return ""
    names = [str(a.get("by") or "?") for a in policy.approvals if isinstance(a, dict)]
    shown = f": {', '.join(names)}" if names else ""
    return f"approvals {len(names)}/{policy.approvers}{shown}"


def policy_text(policy: InterruptPolicy, indent: str = "") -> Text:
    """``rule R: why``, then the four-eyes count and ``needs admin`` when they apply."""
    text = Text()
    text.append("rule ", style="bold")
    text.append(inert(policy.rule, "bold"))
    if policy.why:
        text.append(": ")
        text.append(inert(policy.why))
    extra = [approvals_text(policy)]
    if policy.decide_role and policy.decide_role != "operator":
        extra.append(f"needs {policy.decide_role}")
    shown = [terminal_safe(e) for e in extra if e]
    if shown:
        text.append(f"\n{indent}")
        text.append("; ".join(shown), style="bold yellow")
    return text


def interrupt_header(intr: Interrupt, age_s: float) -> Text:
    text = Text()
    text.append(inert(intr.title or intr.native_id, "bold"))
    text.append(f"\nrun       {terminal_safe(intr.run_id)}")
    text.append(f"\nwaiting   {format_age(age_s)}")
    text.append(f"\naction    {terminal_safe(intr.action or '(none)')}")
    text.append("\ndecisions ")
    text.append(", ".join(d.value for d in intr.allowed_decisions), style="bold")
    if intr.policy is not None:
        text.append("\npolicy    ")
        text.append(policy_text(intr.policy, indent=" " * 10))
    text.append(native_text(intr))
    return text


def native_text(intr: Interrupt) -> Text:
    """A native wait's kind, where it waits, its deadline and who answers it; a batched
    interrupt's calls. Empty for an irq helper interrupt with one call."""
    text = Text()
    if intr.kind.value != "helper":
        text.append("\nkind      ")
        text.append(intr.kind.value, style="bold")
    if intr.wait_site:
        text.append(f"\nwaits at  {terminal_safe(intr.wait_site)}")
    if intr.deadline_at is not None:
        text.append(f"\ndeadline  {intr.deadline_at:%Y-%m-%d %H:%M:%S} UTC")
    for h in intr.handlers:
        about = f": {h.description}" if h.description else ""
        text.append(f"\nhandler   {terminal_safe(f'{h.kind} {h.name}{about}')}")
    for n, call in enumerate(intr.actions, 1):
        allowed = ",".join(d.value for d in call.allowed_decisions)
        args = json.dumps(call.args, separators=(",", ":"), sort_keys=True)
        text.append(f"\ncall {n:<4} {terminal_safe(truncate(f'{call.action} {args}', 60))}")
        text.append(f" [{allowed}]", style="dim")
    return text


def args_text(intr: Interrupt) -> Text:
    text = Text("arguments\n", style="bold")
    text.append(json.dumps(intr.args, indent=2, sort_keys=True) if intr.args else "{}")
    if intr.args_schema:
        required = intr.args_schema.get("required") or []
        props = intr.args_schema.get("properties") or {}
        text.append("\nschema    ", style="bold")
        text.append(terminal_safe(", ".join(
            f"{k}{'*' if k in required else ''}:{(v or {}).get('type', '?')}"
            for k, v in props.items()) or "(object)"))
    return text
