"""Editors for the decisions that native waits and batched interrupts need, hosted by the
confirm dialog like the others (console/tui/widgets/value_editors.py):

- :class:`NativeDecisionEditor`: a native wait (a Temporal signal or update, a Restate
  awakeable or promise, a DBOS recv, a LangGraph breakpoint). Which handler answers (a choice
  when the wait lists several), and the text the decision needs (a respond's payload, a
  reject's feedback, an edit's arguments); the value is the whole :class:`Decision`.
- :class:`PerCallEditor`: a batched interrupt (LangGraph's HumanInTheLoopMiddleware): one
  decision per call, in order, as a JSON list the operator edits.

Both validate live with the one decision check (console/decision_check.py), so the dialog
refuses exactly what the gateway refuses.
"""

from __future__ import annotations

import json
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.widgets import Select

from console.decision_check import check_decision
from console.model import Decision, DecisionKind, Interrupt
from console.terminal_text import terminal_safe
from console.tui.widgets.value_editors import ValueEditor, parse_response

_LABELS = {
    DecisionKind.RESPOND: "Payload for the handler (text, or JSON starting with { [ \")",
    DecisionKind.REJECT: "Feedback (the reason the wait is rejected with)",
    DecisionKind.EDIT: "Edited values (JSON)",
    DecisionKind.APPROVE: "",
}


def schema_template(schema: dict[str, Any] | None) -> tuple[str, list[str]]:
    """A respond payload to fill in, from the JSON Schema its handler published: the
    object's required properties, each ``null`` (so it fails the schema until filled in:
    Yes cannot send the template as it is), and the names of its optional properties.
    ``("", [])`` when the schema names no object properties."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not props:
        return "", []
    required = schema.get("required") if isinstance(schema, dict) else None
    needed = [k for k in required if k in props] if isinstance(required, list) else []
    optional = [k for k in props if k not in needed]
    return (json.dumps(dict.fromkeys(needed), indent=2) if needed else "{}"), optional


def _schema_of(intr: Interrupt, handler: str | None) -> dict[str, Any] | None:
    """The schema the answer must fit: the chosen handler's, or a DBOS topic's."""
    for h in intr.handlers:
        if (h.name == handler or (handler is None and h.kind == "topic")) and h.args_schema:
            return h.args_schema
    return None


def answering_handlers(intr: Interrupt) -> list[str]:
    """The handlers an operator chooses between (a DBOS topic is not a choice here)."""
    return [h.name for h in intr.handlers if h.kind != "topic"]


class NativeDecisionEditor(ValueEditor):
    """A handler choice (when several answer the wait) above the decision's text."""

    DEFAULT_CSS = """
    NativeDecisionEditor > Select { width: 1fr; margin-bottom: 1; }
    NativeDecisionEditor.-no-text > TextArea { display: none; }
    """

    def __init__(self, intr: Interrupt, kind: DecisionKind, id: str | None = None) -> None:
        names = answering_handlers(intr)
        handler = names[0] if len(names) == 1 else None
        initial, label = "", _LABELS[kind]
        if kind is DecisionKind.EDIT:
            initial = json.dumps(intr.args, indent=2, sort_keys=True)
        elif kind is DecisionKind.RESPOND:
            initial, label = self._template(intr, handler, label)
        super().__init__(initial, label=label, id=id)
        self.intr = intr
        self.kind = kind
        self.handlers = names
        self.handler: str | None = handler
        self.set_class(kind is DecisionKind.APPROVE, "-no-text")

    @staticmethod
    def _template(intr: Interrupt, handler: str | None, label: str) -> tuple[str, str]:
        """The payload to fill in and the label naming the optional fields, when the
        handler that answers published a schema (else no text, the plain label)."""
        text, optional = schema_template(_schema_of(intr, handler))
        if text and optional:
            label = f"{label}; optional: {', '.join(optional)}"
        return text, label

    def compose(self) -> ComposeResult:
        if len(self.handlers) > 1:
            described = {h.name: h for h in self.intr.handlers}
            options = [(terminal_safe(f"{n} ({described[n].kind}) {described[n].description}"
                                      .strip()), n) for n in self.handlers]
            yield Select(options, prompt="Answer with which handler?", id="handler-select")
        yield from super().compose()

    @on(Select.Changed, "#handler-select")
    def _handler_chosen(self, event: Select.Changed) -> None:
        event.stop()
        before = self._template(self.intr, self.handler, "")[0]
        self.handler = event.value if isinstance(event.value, str) else None
        area = self.text_area
        if self.kind is DecisionKind.RESPOND and area.text.strip() in ("", before.strip()):
            area.text = self._template(self.intr, self.handler, "")[0]  # untouched: refilled
        self._check(area.text)

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        decision = Decision(kind=self.kind, handler=self.handler)
        if self.kind is DecisionKind.RESPOND:
            value, _, error = parse_response(text)
            if error:
                return None, error, ""
            decision.response = value
        elif self.kind is DecisionKind.REJECT:
            decision.feedback = text
        elif self.kind is DecisionKind.EDIT:
            try:
                decision.args = json.loads(text)
            except json.JSONDecodeError as exc:
                return None, f"not JSON: {exc.msg} (line {exc.lineno})", ""
        problem = check_decision(self.intr, decision)
        if problem is not None:
            return None, str(problem), ""
        via = f"answered through {self.handler}" if self.handler else "ready to send"
        return decision, None, via


def per_call_template(intr: Interrupt, kind: DecisionKind) -> str:
    """Every call with the decision the operator pressed (where that call allows it), as
    the JSON list :class:`PerCallEditor` reads: change the ones to decide otherwise."""
    rows = []
    for call in intr.actions:
        chosen = kind if kind in call.allowed_decisions else call.allowed_decisions[0]
        row: dict[str, Any] = {"call": call.action, "decision": chosen.value}
        if chosen is DecisionKind.EDIT:
            row["args"] = call.args
        elif chosen is DecisionKind.REJECT:
            row["feedback"] = ""
        elif chosen is DecisionKind.RESPOND:
            row["response"] = ""
        rows.append(row)
    # one call per line: a batch of several calls still fits the dialog at 80x24
    return "[\n" + ",\n".join(" " + json.dumps(r) for r in rows) + "\n]"


def parse_calls(text: str) -> tuple[list[Decision] | None, str | None]:
    """The per-call list (``[{"call", "decision", "args"|"feedback"|"response"}]``) as
    Decisions, or what is wrong with its shape."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} (line {exc.lineno})"
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None, "a JSON list with one object per call"
    calls = []
    for i, row in enumerate(rows):
        try:
            kind = DecisionKind(str(row.get("decision", "")))
        except ValueError:
            return None, f"call {i + 1}: decision is approve, edit, reject or respond"
        calls.append(Decision(kind=kind, args=row.get("args"), feedback=row.get("feedback"),
                              response=row.get("response")))
    return calls, None


class PerCallEditor(ValueEditor):
    """One decision per call of a batched interrupt, in order (the run resumes once)."""

    def __init__(self, intr: Interrupt, kind: DecisionKind, id: str | None = None) -> None:
        super().__init__(per_call_template(intr, kind),
                         label="One decision per call (approve, edit + args, reject + "
                               "feedback)", id=id)
        self.intr = intr

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        calls, error = parse_calls(text)
        if calls is None:
            return None, error, ""
        decision = Decision.batched(calls)
        problem = check_decision(self.intr, decision)
        if problem is not None:
            return None, str(problem), ""
        kinds = ", ".join(c.kind.value for c in calls)
        return decision, None, f"resumes once with: {kinds}"
