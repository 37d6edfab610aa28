"""The one confirm dialog every mutation goes through.

It shows the exact targets and the action plan (kept, released, at risk, re-runs,
warnings), optionally hosts an editor (edited arguments, feedback, response), takes a
reason, and defaults to No: focus starts in the editor or the reason field, Enter there
moves on to *No*, and only an explicit move to *Yes* confirms. It cannot be confirmed while
the editor reports an error. Dismisses with a :class:`ConfirmOutcome` or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from console.model import ActionPlan
from console.terminal_text import terminal_safe
from console.tui.inert_text import inert
from console.tui.state_display import UNICODE, GlyphSet
from console.tui.widgets.plan_view import plan_text
from console.tui.widgets.value_editors import ValueEditor


@dataclass(frozen=True)
class ConfirmOutcome:
    reason: str
    value: Any = None


class ConfirmDialog(ModalScreen[ConfirmOutcome | None]):
    """Targets + plan + optional editor + reason; No is the default."""

    BINDINGS = [
        Binding("escape", "no", "No", id="dialog_no"),
    ]

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > #dialog {
        width: 96; max-width: 100%;
        height: auto; max-height: 100%;
        border: round $warning; padding: 0 1;
        background: $surface;
    }
    ConfirmDialog.-danger > #dialog { border: heavy $error; }
    ConfirmDialog > #dialog > #title { text-style: bold; height: auto; }
    ConfirmDialog > #dialog > #body { height: auto; max-height: 60vh; }
    ConfirmDialog.-with-editor > #dialog > #body { max-height: 30vh; }
    ConfirmDialog > #dialog > #reason-row { height: 1; margin-top: 1; }
    ConfirmDialog > #dialog > #reason-row > Static { width: 8; text-style: bold; }
    ConfirmDialog > #dialog > #reason-row > Input { width: 1fr; }
    ConfirmDialog > #dialog > #buttons { height: 1; margin-top: 1; align-horizontal: right; }
    ConfirmDialog > #dialog > #buttons > Button { margin-left: 2; min-width: 8; }
    ConfirmDialog > #dialog > #hint { height: 1; color: $text-muted; }
    ConfirmDialog Button:focus:nocolor { text-style: reverse bold; }
    ConfirmDialog.-ascii > #dialog { border: ascii $warning; }
    ConfirmDialog.-ascii.-danger > #dialog { border: ascii $error; }
    """

    def __init__(
        self,
        *,
        title: str,
        verb: str,
        targets: list[str],
        plan: ActionPlan | None = None,
        details: RenderableType | None = None,
        editor: ValueEditor | None = None,
        danger: bool = False,
        glyphs: GlyphSet = UNICODE,
        ascii_only: bool = False,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.verb = verb
        self.targets = targets
        self.plan = plan
        self.details = details
        self.editor = editor
        self.glyphs = glyphs
        self.set_class(danger, "-danger")
        self.set_class(editor is not None, "-with-editor")
        self.set_class(ascii_only, "-ascii")

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(inert(self.title_text), id="title")
            with VerticalScroll(id="body", can_focus=False):
                if self.plan is not None:
                    yield Static(plan_text(self.plan, self.glyphs), id="plan")
                else:
                    lines = Text()
                    for i, target in enumerate(self.targets):
                        lines.append(f"{'target' if i == 0 else '':<10}", style="bold")
                        lines.append(terminal_safe(target) + "\n")
                    lines.rstrip()
                    yield Static(lines, id="targets")
                if self.details is not None:
                    yield Static(self.details, id="details")
            if self.editor is not None:
                yield self.editor
            with Horizontal(id="reason-row"):
                yield Static("Reason")
                reason = Input(placeholder="why (recorded in the audit log)", compact=True,
                               id="reason")
                reason.cursor_blink = False
                yield reason
            with Horizontal(id="buttons"):
                yield Button("No", id="no", compact=True)
                yield Button(f"Yes, {self.verb}", id="yes", compact=True,
                             variant="error" if self.has_class("-danger") else "warning")
            sep = self.glyphs.separator
            yield Static(f"Tab: next {sep} Enter on a button {sep} Esc: No", id="hint")

    def on_mount(self) -> None:
        if self.editor is not None:
            self.editor.focus_field()
            self._sync_yes()
        else:
            self.query_one("#reason", Input).focus()

    @property
    def reason(self) -> str:
        return self.query_one("#reason", Input).value.strip()

    def _sync_yes(self) -> None:
        ok = self.editor is None or self.editor.error is None
        self.query_one("#yes", Button).disabled = not ok

    @on(ValueEditor.Validity)
    def _validity(self, event: ValueEditor.Validity) -> None:
        event.stop()
        self._sync_yes()

    @on(Input.Submitted, "#reason")
    def _reason_done(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#no", Button).focus()

    @on(Button.Pressed, "#no")
    def action_no(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        if self.editor is not None and self.editor.error is not None:
            self.notify(self.editor.error, title="Cannot submit", severity="error")
            return
        value = self.editor.value if self.editor is not None else None
        self.dismiss(ConfirmOutcome(self.reason, value))
