"""What one decision will do, before it is sent: the interrupt resolved from the snapshot,
the decision checked against it, and the preview an operator confirms (``irq approve|edit|
reject|respond INTERRUPT``; console/cli/decisions.py drives it).

The checks call the console's one rule for each question and only *show* the answer
before the gateway gives it: whether the interrupt allows this kind of decision
(``console.decision_check.kind_problem``) and whether it still takes one
(``console.semantics.decision_conflict``). The gateway checks again when the decision
arrives (the arguments against the schema too); the CLI never decides on its own.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.cli.exits import ExitCode, fail
from console.cli.output import esc, styled
from console.cli.session import expand_interrupt_id

if TYPE_CHECKING:
    from rich.console import Console

    from console.client import FleetView
    from console.model import Decision, Interrupt


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


def refuse_disallowed(interrupt: Interrupt, decision: Decision) -> None:
    """Exit 2 when ``interrupt`` does not allow ``decision``'s kind (the one rule:
    ``console.decision_check.kind_problem``). Bulk decisions check each selected interrupt
    with the same rule (console/cli/bulk.py)."""
    from console.decision_check import kind_problem

    allowed = [d.value for d in interrupt.allowed_decisions]
    if kind_problem(decision.kind.value, allowed) is not None:
        fail(
            ExitCode.USAGE,
            f"{interrupt.id} does not allow '{decision.kind.value}' "
            f"(allowed: {', '.join(allowed) or 'none'})",
        )


def prepare_decision(
    view: FleetView, interrupt: str, decision: Decision, *, merge_args: bool
) -> DecisionPreview:
    """Resolve the id (strictly), check the decision is allowed, lay an edit over the
    proposed arguments when asked to."""
    interrupt_id = expand_interrupt_id(view, interrupt)
    known = view.interrupts.get(interrupt_id)
    if known is not None:
        refuse_disallowed(known, decision)
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
    run = view.runs.get(interrupt_id.partition("#")[0])
    return DecisionPreview(
        interrupt_id, to_send, known, run.contract() if run is not None else None
    )


def refuse_unseen(preview: DecisionPreview) -> Interrupt:
    """The interrupt the preview shows; exit 3 when the snapshot does not have it (nothing
    to show the operator, nothing to dry-run)."""
    if preview.interrupt is None:
        fail(
            ExitCode.NOT_FOUND,
            f"{preview.interrupt_id} is not in the gateway's snapshot: nothing to show",
            hint="list pending interrupts with `irq inbox` (or decide blindly with --yes)",
        )
    return preview.interrupt


def refuse_decided(interrupt: Interrupt) -> None:
    """Exit 4 before asking when the interrupt no longer takes a decision (the one rule:
    ``console.semantics.decision_conflict``)."""
    from console.semantics import decision_conflict

    conflict = decision_conflict(interrupt)
    if conflict is not None:
        fail(ExitCode.CONFLICT, conflict, hint=f"irq audit --target {interrupt.id}")


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


class _PreviewLines:
    """The lines of a preview, one labelled row at a time."""

    def __init__(self, heading: str) -> None:
        self.lines = [heading]

    def row(self, label: str, value: str) -> None:
        self.lines.append(f"  [dim]{label:<10}[/] {value}")

    def raw(self, line: str) -> None:
        self.lines.append(line)


def render_preview(preview: DecisionPreview, console: Console, *, reason: str) -> None:
    """Run, interrupt title, action and arguments (or the edit as a diff), allowed decisions,
    and what goes back to the agent. Agent text goes through ``esc`` (never interpreted)."""
    decision = preview.decision
    kind = decision.kind.value
    intr = preview.interrupt
    out = _PreviewLines(f"[bold]{esc(kind)}[/] {esc(preview.interrupt_id)}")
    run = preview.run
    if run is not None:
        name = f" ({esc(run.get('name'))})" if run.get("name") else ""
        out.row("run", f"{esc(run.get('id'))}{name}  {styled(str(run.get('state', '')))}")
    else:
        out.row("run", esc(preview.interrupt_id.partition("#")[0]))
    if intr is None:
        out.row("interrupt", "[yellow]not in the gateway's snapshot[/]")
    else:
        out.row("title", esc(intr.title))
        if intr.description:
            out.row("details", esc(intr.description))
        out.row("action", esc(intr.action or "-"))
        out.row("status", styled(intr.status))
        allowed = ", ".join(d.value for d in intr.allowed_decisions) or "none"
        out.row("allowed", esc(allowed))
    if kind == "edit":
        diff = args_diff(intr.args if intr is not None else {}, decision.args or {})
        out.row("arguments", "(edit, as a diff against the proposed ones)" if diff else "unchanged")
        for line in diff:
            style = {"-": "red", "+": "green", "@": "dim"}.get(line[:1], "")
            text = esc(line)
            out.raw(f"    [{style}]{text}[/]" if style else f"    {text}")
    elif intr is not None:
        out.row("arguments", "(as proposed)" if intr.args else "none")
        for line in _json_lines(intr.args) if intr.args else []:
            out.raw(f"    {esc(line)}")
    if kind == "reject":
        out.row("feedback", esc(decision.feedback or ""))
    if kind == "respond":
        text = decision.response
        out.row("response", esc(text if isinstance(text, str) else json.dumps(text)))
    out.row("reason", esc(reason) if reason else "[dim]none[/]")
    for line in out.lines:
        console.print(line)


#: what each decision needs besides the id, for the suggested next command
_DECISION_INPUT = {
    "approve": "",
    "edit": " --args JSON",
    "reject": " --feedback TEXT",
    "respond": " --text TEXT",
}


def decision_input(kind: str, interrupt: dict[str, Any] | None) -> str:
    """What decision ``kind`` needs besides the id, for a suggested command (``interrupt``:
    its contract): a respond to a native handler that published a JSON Schema takes JSON,
    the schema's required fields named (``--text`` would send a string the schema refuses)."""
    if kind == "respond" and interrupt is not None:
        for handler in interrupt.get("handlers") or []:
            schema = handler.get("args_schema") if isinstance(handler, dict) else None
            if isinstance(schema, dict):
                required = schema.get("required")
                fields = ", ".join(f'"{k}": ...' for k in required if isinstance(k, str)) if (
                    isinstance(required, list)) else "..."
                return f" --json '{{{fields}}}'"
    return _DECISION_INPUT[kind]
