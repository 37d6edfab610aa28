"""What a command did, per target: outcome (word + symbol), detail, and the plan applied."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.model import CommandResult, RunState
from console.tui.inert_text import inert
from console.tui.state_display import UNICODE, GlyphSet

OUTCOME_STYLE = {"applied": "green", "conflict": "yellow", "failed": "red", "forbidden": "red",
                 "recorded": "cyan"}
SETTLED = ("applied", "recorded")  # recorded: a four-eyes approval counted, not yet delivered


def results_table(results: list[CommandResult], g: GlyphSet = UNICODE) -> Table:
    table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
    table.add_column("", width=1, no_wrap=True)
    table.add_column("OUTCOME", no_wrap=True)
    table.add_column("TARGET", overflow="fold", ratio=2)
    table.add_column("DETAIL", overflow="fold", ratio=3)
    for r in results:
        mark = (g.states[RunState.COMPLETED] if r.outcome == "applied"
                else g.states[RunState.WAITING] if r.outcome == "recorded"
                else g.states[RunState.FAILED])
        style = OUTCOME_STYLE.get(r.outcome, "")
        detail = r.detail or ""
        if r.error and r.error not in detail:
            detail = f"{r.error}: {detail}" if detail else r.error
        if r.replayed:
            detail += " (already sent earlier: not sent again)"
        table.add_row(Text(mark, style=style), inert(r.outcome, f"bold {style}"),
                      inert(r.target), inert(detail))
    return table


class ResultsDialog(ModalScreen[None]):
    """Per-item results of one command; Enter or Esc closes."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="results_close"),
    ]

    DEFAULT_CSS = """
    ResultsDialog { align: center middle; }
    ResultsDialog > #dialog {
        width: 96; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; padding: 0 1; background: $surface;
    }
    ResultsDialog.-failed > #dialog { border: round $error; }
    ResultsDialog.-ascii > #dialog { border: ascii $primary; }
    ResultsDialog > #dialog > #title { text-style: bold; }
    ResultsDialog > #dialog > #body { height: auto; max-height: 70vh; }
    ResultsDialog > #dialog > #close { margin-top: 1; }
    """

    def __init__(self, title: str, results: list[CommandResult], glyphs: GlyphSet = UNICODE,
                 ascii_only: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.results = results
        self.glyphs = glyphs
        self.set_class(any(r.outcome not in SETTLED for r in results), "-failed")
        self.set_class(ascii_only, "-ascii")

    def compose(self) -> ComposeResult:
        applied = sum(r.outcome == "applied" for r in self.results)
        recorded = sum(r.outcome == "recorded" for r in self.results)
        title = f"{self.title_text}: {applied}/{len(self.results)} applied"
        if recorded:
            title += f", {recorded} recorded (needs another approver)"
        with Vertical(id="dialog"):
            yield Static(title, id="title")
            with VerticalScroll(id="body", can_focus=False):
                yield Static(results_table(self.results, self.glyphs), id="results")
            yield Button("OK", id="close", compact=True)

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def on_button_pressed(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
