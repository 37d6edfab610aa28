"""A partial screen update that writes only the changed part of a line.

Textual (8.2) repaints a dirty region of a line from the start of the widget that holds it:
a table that changes one cell at the right end of a 200-column row still writes the whole
row. :func:`render_spans` writes each dirty span from the first segment that reaches it
(whole segments only, so no character, wide or not, is ever cut in two), up to the end of
the span, as Textual does. The fleet table marks only the cells that changed as dirty
(``widgets/run_table.py``); this is what makes that pay off on the wire.

This module holds the writing itself, on the update's plain data (chops, spans, chop ends);
the Textual class it plugs into, a private one, is wrapped in ``textual_internals.py``
(:class:`~console.tui.textual_internals.SpanChopsUpdate`); the Pilot/snapshot tests exercise
this path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.control import Control
from textual.strip import Strip


def render_spans(chops: Sequence[Mapping[int, Strip | None]],
                 spans: Sequence[tuple[int, int, int]], chop_ends: Sequence[Sequence[int]],
                 console: Console) -> str:
    """The terminal output for ``spans`` (``(y, x1, x2)``): of line ``y``'s chops (strips by
    start column, ending at ``chop_ends[y]``), only the segments that reach ``x1..x2``."""
    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    last_y = spans[-1][0]
    for y, x1, x2 in spans:
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
