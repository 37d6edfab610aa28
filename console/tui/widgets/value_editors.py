"""Editors hosted by the confirm dialog: JSON arguments (validated live against the
interrupt's schema), reject feedback, and a free-form response (text or JSON).

Each editor exposes ``value`` and ``error`` and posts :class:`ValueEditor.Validity` when
its validity changes; the dialog will not submit while ``error`` is set.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static, TextArea

from console.decision_check import decision_problem
from console.model import DecisionKind


def validate_args(
    text: str,
    schema: dict[str, Any] | None,
    allowed: Sequence[DecisionKind] = (DecisionKind.EDIT,),
) -> tuple[Any, str | None]:
    """(parsed value, error) for edited arguments: JSON, then the one decision check
    (console/decision_check.py), so the editor refuses exactly what the gateway refuses."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    problem = decision_problem(DecisionKind.EDIT, allowed, args=value, schema=schema)
    return value, str(problem) if problem is not None else None


def parse_response(text: str) -> tuple[Any, str, str | None]:
    """(value, kind, error): JSON when it starts like JSON, otherwise plain text."""
    stripped = text.strip()
    if not stripped:
        return "", "text", "a response cannot be empty"
    if stripped[0] in "{[\"":
        try:
            return json.loads(stripped), "JSON", None
        except json.JSONDecodeError as exc:
            return None, "JSON", f"looks like JSON but is not: {exc.msg} (line {exc.lineno})"
    return text, "text", None


class ValueEditor(Vertical):
    """Base class: a text area plus a status line under it."""

    DEFAULT_CSS = """
    ValueEditor { height: auto; }
    ValueEditor > TextArea { height: 8; }
    ValueEditor > .editor-status { height: auto; color: $text-muted; }
    ValueEditor > .editor-status.-error { color: $error; text-style: bold; }
    """

    class Validity(Message):
        def __init__(self, editor: ValueEditor, ok: bool) -> None:
            super().__init__()
            self.editor = editor
            self.ok = ok

    def __init__(self, text: str = "", *, label: str = "", placeholder: str = "",
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.initial = text
        self.label = label
        self.placeholder = placeholder
        self.value: Any = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        if self.label:
            yield Static(self.label, classes="editor-label")
        area = TextArea(self.initial, soft_wrap=True, tab_behavior="focus", compact=True,
                        id="editor-text", placeholder=self.placeholder)
        area.cursor_blink = False
        yield area
        yield Static("", classes="editor-status")

    def on_mount(self) -> None:
        self._check(self.initial)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self._check(event.text_area.text)

    @property
    def text_area(self) -> TextArea:
        return self.query_one(TextArea)

    def focus_field(self) -> None:
        """Where typing starts when the dialog opens."""
        self.text_area.focus()

    def _check(self, text: str) -> None:
        self.value, self.error, note = self.evaluate(text)
        status = self.query_one(".editor-status", Static)
        status.set_class(self.error is not None, "-error")
        status.update(Text(f"! {self.error}") if self.error else Text(note))
        self.post_message(self.Validity(self, self.error is None))

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        """(value, error, note shown when valid)."""
        return text, None, ""


class ArgsEditor(ValueEditor):
    """Edited tool arguments as JSON, validated against the interrupt's schema."""

    def __init__(self, args: dict[str, Any], schema: dict[str, Any] | None,
                 id: str | None = None) -> None:
        super().__init__(json.dumps(args, indent=2, sort_keys=True),
                         label="Arguments (JSON)", id=id)
        self.schema = schema

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        value, error = validate_args(text, self.schema)
        note = "valid against the schema" if self.schema else "valid JSON (no schema)"
        return value, error, note


class FeedbackEditor(ValueEditor):
    """Feedback text that goes back to the agent with a rejection."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__("", label="Feedback to the agent",
                         placeholder="why not, and what to do instead", id=id)

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        return text, None, "sent to the agent as the tool's result"


class ResponseEditor(ValueEditor):
    """The human's answer: plain text, or JSON when it starts with { [ or \"."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__("", label="Response (text, or JSON starting with { [ \")",
                         placeholder="your answer", id=id)

    def evaluate(self, text: str) -> tuple[Any, str | None, str]:
        value, kind, error = parse_response(text)
        return value, error, f"sends {kind}"
