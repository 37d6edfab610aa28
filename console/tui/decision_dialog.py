"""What the confirm dialog shows for a decision, the editor it hosts, and the Decision built
from what the operator entered: an irq helper interrupt (arguments, feedback, a response), a
native wait (which handler answers, the payload) and a batched interrupt (one decision per
call). The App's decision flow asks these and sends the result."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from console.model import Decision, DecisionKind, Interrupt, InterruptKind
from console.terminal_text import terminal_safe
from console.tui.interrupt_text import args_text, policy_text
from console.tui.widgets.native_editors import NativeDecisionEditor, PerCallEditor
from console.tui.widgets.value_editors import (
    ArgsEditor,
    FeedbackEditor,
    ResponseEditor,
    ValueEditor,
)


def decision_verb(intr: Interrupt, kind: DecisionKind) -> str:
    """What the dialog's title and Yes say: a batched interrupt's calls are decided one by
    one, whatever key opened the dialog."""
    return "decide" if intr.actions else kind.value


def decision_editor(intr: Interrupt, kind: DecisionKind) -> ValueEditor | None:
    if intr.actions:
        return PerCallEditor(intr, kind, id="calls-editor")
    if intr.kind is not InterruptKind.HELPER and (
            intr.handlers or kind is not DecisionKind.APPROVE):
        return NativeDecisionEditor(intr, kind, id="native-editor")
    if kind is DecisionKind.EDIT:
        return ArgsEditor(intr.args, intr.args_schema, id="args-editor")
    if kind is DecisionKind.REJECT:
        return FeedbackEditor(id="feedback-editor")
    if kind is DecisionKind.RESPOND:
        return ResponseEditor(id="response-editor")
    return None


def decision_details(intr: Interrupt, kind: DecisionKind) -> RenderableType:
    head = Text()
    head.append(f"{terminal_safe(intr.title)}\n", style="bold")
    head.append(f"run {terminal_safe(intr.run_id)}\n", style="dim")
    if intr.wait_site:
        head.append(f"waits at {terminal_safe(intr.wait_site)}\n", style="dim")
    if intr.policy is not None:
        head.append(policy_text(intr.policy))
        head.append("\n")
    action = terminal_safe(intr.action or "")
    if intr.actions:
        head.append(f"{len(intr.actions)} calls, each decided on its own; the run resumes "
                    "once with the decisions in order")
        return head
    if kind is DecisionKind.APPROVE:
        head.append("runs as proposed: ", style="bold")
        head.append(action or "(no action)")
        return Group(head, args_text(intr))
    if kind is DecisionKind.REJECT:
        head.append(f"does not run {action or 'the proposed action'}; "
                    "your feedback goes back to the agent")
    elif kind is DecisionKind.RESPOND:
        head.append("your answer becomes the result of "
                    f"{action or 'the tool call'}" if intr.kind is InterruptKind.HELPER
                    else "your answer is delivered to the waiting run")
    else:
        head.append(f"runs {action or 'the action'} with your arguments")
    return head


def decision_from(kind: DecisionKind, editor: ValueEditor | None, value: Any) -> Decision:
    """The Decision the operator confirmed (the native and per-call editors build it)."""
    if isinstance(editor, NativeDecisionEditor | PerCallEditor):
        assert isinstance(value, Decision)
        return value
    decision = Decision(kind=kind)
    if kind is DecisionKind.EDIT:
        decision.args = value
    elif kind is DecisionKind.REJECT:
        decision.feedback = value or ""
    elif kind is DecisionKind.RESPOND:
        decision.response = value
    return decision
