"""One line of counts per state (symbol + number, words when there is room), sort, filter."""

from __future__ import annotations

from collections import Counter

from rich.text import Text
from textual.widgets import Static

from console.model import RunState
from console.tui.state_display import (
    ATTENTION_ORDER,
    STATE_LABEL,
    STATE_TONE,
    UNICODE,
    GlyphSet,
    truncate_text,
)

TONE_STYLE = {
    "ok": "green",
    "warn": "bold yellow",
    "bad": "bold red",
    "ask": "bold magenta",
    "calm": "cyan",
    "done": "dim",
    "dim": "dim",
}


def summary_text(counts: Counter[RunState], shown: int, total: int, sort: str, reverse: bool,
                 query: str, width: int, g: GlyphSet = UNICODE, marked: int = 0) -> Text:
    present = [s for s in ATTENTION_ORDER if counts.get(s)]
    right = Text()
    if marked:
        right.append(f" {marked} marked", style="bold magenta")
    if query:
        right.append(f" /{query}", style="bold")
    right.append(f"  {shown}/{total}", style="bold" if shown != total else "")
    right.append(f"  sort {sort}{g.arrow_down if reverse else g.arrow_up} ", style="dim")
    room = width - right.cell_len - 1
    for words in (True, False):
        left = Text(" ")
        for state in present:
            style = TONE_STYLE[STATE_TONE[state]]
            label = f" {STATE_LABEL[state]}" if words else ""
            left.append(f"{g.states[state]}{label} {counts[state]}", style=style)
            left.append("  ")
        if left.cell_len <= room:
            break
    if left.cell_len > room:
        truncate_text(left, max(0, room), g)
    pad = max(1, width - left.cell_len - right.cell_len)
    return left + Text(" " * pad) + right


class SummaryLine(Static):
    DEFAULT_CSS = """
    SummaryLine { height: 1; background: $boost; }
    """

    def __init__(self, glyphs: GlyphSet = UNICODE, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self._args: tuple[Counter[RunState], int, int, str, bool, str] | None = None
        self.marked = 0  # marked rows (console/tui/marks.py)
        self._last: Text | None = None

    def show(self, counts: Counter[RunState], shown: int, total: int, sort: str,
             reverse: bool, query: str, marked: int = 0) -> None:
        args = (counts, shown, total, sort, reverse, query)
        self._args = args
        self.marked = marked
        text = summary_text(*args, max(20, self.size.width), self.glyphs, marked)
        if text != self._last:
            self._last = text
            self.update(text, layout=False)

    def on_resize(self) -> None:
        if self._args is not None:
            self.show(*self._args, marked=self.marked)
