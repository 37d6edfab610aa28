"""A partial screen update that writes only the changed part of a line.

Textual (8.2) repaints a dirty region of a line from the start of the widget that holds it:
a table that changes one cell at the right end of a 200-column row still writes the whole
row. :class:`SpanChopsUpdate` writes each dirty span from the first segment that reaches it
(whole segments only, so no character, wide or not, is ever cut in two), up to the end of
the span, as Textual does. The fleet table marks only the cells that changed as dirty
(``widgets/run_table.py``); this is what makes that pay off on the wire.

It replaces Textual's ``ChopsUpdate`` in :meth:`IrqApp._display`; the pin on textual in
``pyproject.toml`` is exact, and the Pilot/snapshot tests exercise this path.
"""

from __future__ import annotations

from rich.console import Console
from rich.control import Control
from textual._compositor import ChopsUpdate
from textual.strip import Strip


class SpanChopsUpdate(ChopsUpdate):
    """Textual's partial update, each span written from where it starts, not its widget."""

    def __init__(self, update: ChopsUpdate) -> None:
        super().__init__(update.chops, update.spans, update.chop_ends)

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        move_to = Control.move_to
        chops = self.chops
        chop_ends = self.chop_ends
        last_y = self.spans[-1][0]
        for y, x1, x2 in self.spans:
            line = chops[y]
            ends = chop_ends[y]
            for end, (x, strip) in zip(ends, line.items(), strict=False):
                if strip is None or x > x2 or end <= x1:
                    continue
                if x < x1:
                    strip, x = skip_to(strip, x, x1)
                if end > x2:
                    strip = strip.crop(0, x2 - x)
                append(move_to(x, y).segment.text)
                append(strip.render(console))
            if y != last_y:
                append("\n")
        return "".join(sequences)


def skip_to(strip: Strip, x: int, x1: int) -> tuple[Strip, int]:
    """``strip`` (drawn from column ``x``) without its whole segments that end at or before
    column ``x1``, and the column it now starts at."""
    skipped = 0
    for segment in strip:
        width = segment.cell_length
        if x + skipped + width > x1:
            break
        skipped += width
    if not skipped:
        return strip, x
    return strip.crop(skipped), x + skipped
