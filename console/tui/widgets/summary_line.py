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


NOTE_HINT = "  (enter: detail)"


def summary_text(counts: Counter[RunState], shown: int, total: int, sort: str, reverse: bool,
                 query: str, width: int, g: GlyphSet = UNICODE, marked: int = 0,
                 note: Text | None = None, note_hint: str = "") -> Text:
    """``note``: about the selected run (a failed run's error), shown after the counts when
    there is room: the counts give up their words first, then the sort (the table's header
    marks it too) and ``note_hint``, then the note is cut."""
    present = [s for s in ATTENTION_ORDER if counts.get(s)]
    right = Text()
    if marked:
        right.append(f" {marked} marked", style="bold magenta")
    if query:
        right.append(f" /{query}", style="bold")
    right.append(f"  {shown}/{total}", style="bold" if shown != total else "")
    short = right.copy()
    right.append(f"  sort {sort}{g.arrow_down if reverse else g.arrow_up} ", style="dim")
    short.append(" ")
    if note is not None:
        hinted = note + Text(note_hint, style="dim") if note_hint else note
        tries = [(right, hinted), (right, note), (short, hinted), (short, note)]
        for i, (side, text) in enumerate(tries):
            room = width - side.cell_len - 1
            left, cut_counts = _counts(counts, present, g, room - min(text.cell_len, 24) - 2)
            note_room = room - left.cell_len
            last = i == len(tries) - 1
            if cut_counts or note_room < 12 or (text.cell_len > note_room and not last):
                continue
            cut = text.copy()
            if cut.cell_len > note_room:
                truncate_text(cut, note_room, g)
            left.append(cut)
            pad = max(1, width - left.cell_len - side.cell_len)
            return left + Text(" " * pad) + side
    left, _cut = _counts(counts, present, g, width - right.cell_len - 1)
    pad = max(1, width - left.cell_len - right.cell_len)
    return left + Text(" " * pad) + right


def _counts(counts: Counter[RunState], present: list[RunState], g: GlyphSet,
            room: int) -> tuple[Text, bool]:
    """The counts per state in ``room`` cells: with words, else symbols only, else cut
    (and True)."""
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
        return left, True
    return left, False


class SummaryLine(Static):
    DEFAULT_CSS = """
    SummaryLine { height: 1; background: $boost; }
    """

    def __init__(self, glyphs: GlyphSet = UNICODE, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self._args: tuple[Counter[RunState], int, int, str, bool, str] | None = None
        self.marked = 0  # marked rows (console/tui/marks.py)
        self.note: Text | None = None
        self._last: Text | None = None

    def show(self, counts: Counter[RunState], shown: int, total: int, sort: str,
             reverse: bool, query: str, marked: int = 0, note: Text | None = None) -> None:
        args = (counts, shown, total, sort, reverse, query)
        self._args = args
        self.marked = marked
        self.note = note
        text = summary_text(*args, max(20, self.size.width), self.glyphs, marked, note,
                            NOTE_HINT)
        if text != self._last:
            self._last = text
            self.update(text, layout=False)

    def on_resize(self) -> None:
        if self._args is not None:
            self.show(*self._args, marked=self.marked, note=self.note)
