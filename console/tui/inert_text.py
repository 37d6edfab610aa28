"""Foreign text in the TUI: shown as plain, inert text, never interpreted.

Widgets build their content from agent, backend and client text with :func:`inert` (plain
``Text``: no markup parsed from it, control characters visible, so widths are measured on
what is shown). :class:`InertControlCharacters` is the last line of defence: a line filter
that runs on every line Textual is about to write, whatever built it (a
notification, a Markdown block, a text area, a widget that forgot), and does the same to any
segment that still holds a control character. Rich and Textual count those characters as
zero cells wide, so the visible escape makes the segment longer: the line is cut back to
the width it had, which can misalign a row that held hostile text but never moves the
cursor the way the raw character would have.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from console.terminal_text import UNSAFE_IN_LINE, terminal_safe


class InertControlCharacters(LineFilter):
    """Shows control, bidi-override and separator characters as visible escapes."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        line = "".join([s.text for s in segments if not s.control])
        if line.isprintable():  # the common case: one pass in C
            return segments
        search = UNSAFE_IN_LINE.search
        if not search(line):
            return segments
        length = Segment.get_line_length(segments)
        safe = [
            s if s.control or not search(s.text) else Segment(terminal_safe(s.text), s.style)
            for s in segments
        ]
        return Segment.adjust_line_length(safe, length)


def inert(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """``value`` (foreign text) as plain Rich text: no markup, control characters visible."""
    text = "" if value is None else str(value)
    return Text(terminal_safe(text, multiline=multiline), style=style)
