"""The fleet table, drawn with the Line API so 10,000 live rows cost only what is visible.

The table owns no data: it reads a :class:`RunRowIndex` the app keeps current and is told
what changed (``rows_changed``) once per batch, never per event. The cursor follows a run,
not a position: when the order changes under it, the selected run keeps its place on
screen. ``tick()`` (once a second) lets ages advance.

What goes to the terminal is what changed on screen, not what changed in the data: each
screen line remembers the cells it was drawn with (text and tone per column), and a change
redraws only the cells whose text or tone differ (a region of the line; Textual writes just
those segments). A heartbeat that leaves the visible text alone writes nothing; an age that
moves from ``8s`` to ``9s`` writes six cells, not the line. Over a slow SSH link to a bastion
this is the difference between a console that keeps up and one that lags.

Invariant: every change to what a line shows (rows, order, clock, cursor, marks, layout) is
followed, before the next repaint, by a comparison of that line against what it was drawn
with, or by a full refresh. The clock (``_now``) moves only in ``tick()`` and in full-window
comparisons, so a repaint never draws an age that no comparison saw.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widgets import Static

from console.model import utcnow
from console.terminal_text import terminal_safe
from console.tui.marks import MARK_GLYPH
from console.tui.run_columns import GUTTER, SEP, Layout, cell, layout, pad
from console.tui.run_rows import RunRow, RunRowIndex
from console.tui.state_display import UNICODE, GlyphSet, truncate, truncate_middle
from console.tui.textual_internals import FollowFocus

TONES = ("ok", "warn", "bad", "ask", "calm", "done", "dim")

#: what one screen line shows: (cursor on it, marker, ((text, tone) per column))
LineCells = tuple[bool, str, tuple[tuple[str, str], ...]]
_BLANK: LineCells = (False, "", ())  # a line below the last row

#: the untruncated foreign text behind a cell, to truncate again once made inert
_FULL_TEXT: dict[str, Callable[[RunRow], str]] = {
    "run": lambda row: row.run.native_id,
    "name": lambda row: row.run.name,
    "step": lambda row: row.run.in_flight_step or "",
    "backend": lambda row: f"{row.run.backend}:{row.run.context}",
}


class RunTableHeader(Static):
    """Column titles, aligned with the table below (which always reserves its scrollbar)."""

    DEFAULT_CSS = """
    RunTableHeader {
        height: 1;
        text-style: bold;
        background: $panel;
        color: $foreground;
    }
    RunTableHeader:ansi { background: ansi_default; text-style: bold underline; }
    """

    def __init__(self, scrollbar: int = 1, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.scrollbar = scrollbar
        self.sort_marker: tuple[str, str] = ("", "")  # column key, arrow
        self._last = ""

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        lay = layout(max(1, self.size.width - self.scrollbar))
        parts = [" " * GUTTER]
        for i, (col, width) in enumerate(lay.columns):
            title = col.title
            if self.sort_marker[0] == col.key:
                title += self.sort_marker[1]
            parts.append(pad(title, width, col.right))
            if i < len(lay.columns) - 1:
                parts.append(" " * SEP)
        line = "".join(parts)
        if line != self._last:
            self._last = line
            self.update(line, layout=False)


class RunTable(FollowFocus, ScrollView, can_focus=True):
    """Rows of runs with a cursor; posts :class:`RunTable.Highlighted` and ``Chosen``."""

    BINDINGS = [
        Binding("down,j", "cursor(1)", "Down", show=False, id="cursor_down"),
        Binding("up,k", "cursor(-1)", "Up", show=False, id="cursor_up"),
        Binding("pagedown,ctrl+f", "page(1)", "Page down", show=False, id="page_down"),
        Binding("pageup,ctrl+b", "page(-1)", "Page up", show=False, id="page_up"),
        Binding("home,g", "jump(0)", "Top", show=False, id="top"),
        Binding("end,G", "jump(-1)", "Bottom", show=False, id="bottom"),
        Binding("enter", "choose", "open", show=False, id="open"),
    ]

    COMPONENT_CLASSES = {
        "run-table--cursor",
        "run-table--ok",
        "run-table--warn",
        "run-table--bad",
        "run-table--ask",
        "run-table--calm",
        "run-table--done",
        "run-table--dim",
    }

    DEFAULT_CSS = """
    RunTable {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
        & > .run-table--cursor { background: $block-cursor-blurred-background; }
        &:focus > .run-table--cursor {
            background: $block-cursor-background;
            text-style: bold;
        }
        &:nocolor > .run-table--cursor { text-style: reverse bold; }
        & > .run-table--ok { color: $success; }
        & > .run-table--warn { color: $warning; text-style: bold; }
        & > .run-table--bad { color: $error; text-style: bold; }
        & > .run-table--ask { color: $accent; text-style: bold; }
        & > .run-table--calm { color: $secondary; }
        & > .run-table--done { color: $text-muted; }
        & > .run-table--dim { color: $text-muted; }
    }
    """

    class Highlighted(Message):
        def __init__(self, run_id: str | None) -> None:
            super().__init__()
            self.run_id = run_id

    class Chosen(Message):
        def __init__(self, run_id: str) -> None:
            super().__init__()
            self.run_id = run_id

    def __init__(
        self,
        index: RunRowIndex,
        *,
        glyphs: GlyphSet = UNICODE,
        clock: Callable[[], datetime] = utcnow,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.index = index
        self.glyphs = glyphs
        self.clock = clock
        self.cursor = 0
        self.selected_id: str | None = None
        self._layout: Layout | None = None
        self._now: datetime = clock()
        self.lines_rendered = 0  # for the benchmark
        self.empty_text = ""  # shown when there is no row (why the table is empty)
        self.marks: Collection[str] = frozenset()  # marked run ids (console/tui/marks.py)
        #: runs with an open alert (stalled, retrying, ...): marked beside their state, so a
        #: progress frozen under fresh beats is not silent (set_alerted)
        self.alerted: frozenset[str] = frozenset()
        self._styles: dict[str, Style] = {}
        self._strips: LRUCache[tuple[LineCells, int], Strip] = LRUCache(1024)
        self._drawn: dict[int, LineCells] = {}  # screen line -> the cells it was drawn with
        self._spans: list[tuple[int, int]] = []  # x range of each column in the layout
        self._window_compares = 0  # times the whole window was compared (see rows_changed)
        #: the cells last computed for a position, and what they were computed from: a line
        #: is compared, then drawn, with the same inputs; computed once
        self._memo: dict[int, tuple[RunRow, bool, bool, datetime, Layout, LineCells]] = {}
        self._following = False  # scrolling to keep the selected run in its place
        self._thumb_stale = False  # the scrollbar's thumb is drawn where it was

    # ------------------------------------------------------------------ data in

    def on_mount(self) -> None:
        self.rows_changed(None, reordered=True)

    def on_resize(self) -> None:
        self._layout = None
        self._strips.clear()
        self._drawn.clear()
        self._scroll_cursor_into_view()
        self.refresh()

    def set_alerted(self, run_ids: frozenset[str]) -> None:
        """The runs an open alert is about (alerts change rarely: redraw every line)."""
        if run_ids == self.alerted:
            return
        self.alerted = run_ids
        self._memo.clear()
        self._drawn.clear()
        self.refresh()

    def rows_changed(self, changed: set[str] | None, *, reordered: bool) -> None:
        """The index changed: ``changed`` run ids (None: anything), order rebuilt or not.

        Only the cells that now read differently are redrawn: a re-sort that moves nothing
        on screen, or a heartbeat that changes no visible text, writes nothing.
        """
        visible = self.index.visible
        height = self.scrollable_content_region.height
        top = int(self.scroll_offset.y)
        if reordered or changed is None:
            screen_row = self.cursor - top
            self.virtual_size = Size(self.size.width, len(visible))
            pos = self.index.position(self.selected_id) if self.selected_id else None
            if pos is None:
                pos = min(self.cursor, max(0, len(visible) - 1))
            old_selected = self.selected_id
            self.cursor = pos
            self.selected_id = visible[pos] if visible else None
            self._now = self.clock()
            compared = self._window_compares
            if 0 <= screen_row < max(1, height):
                want = max(0, min(pos - screen_row, max(0, len(visible) - height)))
                if want != top:
                    self._following = True  # the data scrolls the view, not the operator
                    try:
                        self.scroll_to(y=want, animate=False, immediate=True)
                    finally:
                        self._following = False
            self._scroll_cursor_into_view()
            if self._window_compares == compared:  # no scroll compared the window already
                self.redraw_window()
            if self.selected_id != old_selected:
                self.post_message(self.Highlighted(self.selected_id))
            return
        rows = self.index.rows
        for pos, rid in enumerate(visible[top:top + height], top):  # the lines on screen
            if rid in changed:
                row = rows.get(rid)
                if row is not None:
                    self._compare_line(pos, row)

    def redraw_window(self) -> None:
        """Compare every line on screen with what it was drawn with; redraw what differs."""
        self._window_compares += 1
        if not self.index.visible or self.empty_text:
            self._drawn.clear()
            self.refresh()  # an empty table: the line that says why
            return
        top = int(self.scroll_offset.y)
        height = self.scrollable_content_region.height
        visible = self.index.visible
        rows = self.index.rows
        for pos in range(top, top + height):
            row = rows.get(visible[pos]) if pos < len(visible) else None
            if row is not None:
                self._compare_line(pos, row)
            elif self._drawn.get(pos - top) != _BLANK:
                self.refresh_line(pos)

    def _compare_line(self, pos: int, row: RunRow) -> None:
        """Refresh the cells of line ``pos`` that differ from what its screen line shows."""
        cells = self._cells(row, pos)
        y = pos - int(self.scroll_offset.y)
        drawn = self._drawn.get(y)
        if drawn is None or drawn[:2] != cells[:2] or len(drawn[2]) != len(cells[2]):
            self.refresh_line(pos)
            return
        changed = [span for span, old, new in zip(self._spans, drawn[2], cells[2], strict=True)
                   if old != new]
        if len(changed) > 2:
            # most of the line differs (another run on this line after a re-sort): one
            # region for the line costs Textual far less bookkeeping than a region per cell
            self.refresh_line(pos)
            return
        for x0, x1 in changed:
            self.refresh(Region(x0, y, x1 - x0, 1))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """A scroll redraws only the screen lines that now read differently.

        Textual repaints the whole view on every scroll. Here the cursor follows its run:
        when runs turn late above it, the view scrolls to keep the selected run in its place,
        and the lines on screen usually still show the same runs; so lines are compared
        (they are remembered per screen line, not per row). The scrollbar is repainted only
        when its thumb moves by a visible step (an eighth of a cell), and for scrolls the data
        caused (not the operator) at most once a second, from ``tick()``: every cell of the
        bar is written each time, and under a storm of state changes that adds up.
        """
        bar = self.vertical_scrollbar
        if self.show_vertical_scrollbar:
            moved = self._thumb_step(new_value) != self._thumb_step(bar.position)
            if moved and not self._following:
                bar.position = new_value
            else:
                bar.set_reactive(ScrollBar.position, new_value)
                self._thumb_stale = self._thumb_stale or moved
        if round(old_value) != round(new_value):
            self.redraw_window()

    def _thumb_step(self, y: float) -> int:
        """Where the scrollbar thumb starts, in eighths of a cell (Textual's drawing)."""
        size = self.scrollable_content_region.height
        total = self.virtual_size.height
        if size <= 0 or total <= size:
            return 0
        thumb = max(1.0, size / (total / size))
        return int((size - thumb) * (y / (total - size)) * 8)

    def tick(self) -> None:
        """Ages move on: redraw the cells whose text changed (and only those)."""
        self._now = self.clock()
        if self.index.visible:
            self.redraw_window()
        if self._thumb_stale:
            self._thumb_stale = False
            self.vertical_scrollbar.refresh()

    # ---------------------------------------------------------------- rendering

    def _get_layout(self) -> Layout:
        width = self.scrollable_content_region.width
        if self._layout is None or self._layout.width != width:
            self._layout = layout(width)
            self._spans = []
            x = GUTTER
            last = len(self._layout.columns) - 1
            for i, (_col, w) in enumerate(self._layout.columns):
                gap = SEP if i < last else 0
                self._spans.append((x, x + w + gap))  # a cell and the gap after it
                x += w + gap
        return self._layout

    def _cells(self, row: RunRow, pos: int) -> LineCells:
        """What line ``pos`` shows for ``row``: text (padded to its column) and tone."""
        lay = self._get_layout()
        g = self.glyphs
        is_cursor = pos == self.cursor
        marked = row.run.id in self.marks
        memo = self._memo.get(pos)
        if (memo is not None and memo[0] is row and memo[1] == is_cursor and memo[2] == marked
                and memo[3] == self._now and memo[4] is lay):
            return memo[5]
        marker = (">" if g.ellipsis == "~" else "▌") if is_cursor else " "
        if marked:
            marker = MARK_GLYPH  # marked: '*' (the cursor row still shows its cursor style)
        cells = []
        for col, w in lay.columns:
            text, tone = cell(row, col, w, self._now, g, lay.progress_bar,
                              alerted=row.run.id in self.alerted)
            safe = terminal_safe(text)  # names, ids, steps come from agents
            if safe != text and len(safe) > w:
                full = _FULL_TEXT.get(col.key)
                cut = truncate_middle if col.key == "run" else truncate
                safe = cut(terminal_safe(full(row)) if full else safe, w, g.ellipsis)
            cells.append((pad(safe, w, col.right), tone))
        line: LineCells = (is_cursor, marker, tuple(cells))
        if len(self._memo) > 4 * max(1, self.scrollable_content_region.height):
            self._memo.clear()
        self._memo[pos] = (row, is_cursor, marked, self._now, lay, line)
        return line

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        pos = int(self.scroll_offset.y) + y
        visible = self.index.visible
        row = self.index.rows.get(visible[pos]) if pos < len(visible) else None
        if row is None:
            self._drawn[y] = _BLANK
            if not visible and y == 1 and self.empty_text:
                text = ("  " + terminal_safe(self.empty_text))[:width].ljust(width)
                return Strip([Segment(text, self._style("dim"))], width)
            return Strip.blank(width, self.rich_style)
        cells = self._cells(row, pos)
        self._drawn[y] = cells
        strip = self._strips.get((cells, width))
        if strip is None:
            strip = self._render_cells(cells, width)
            self._strips[(cells, width)] = strip
        return strip

    def _render_cells(self, cells: LineCells, width: int) -> Strip:
        self.lines_rendered += 1
        is_cursor, marker, texts = cells
        style = self._cursor_style if is_cursor else self._style
        segments = [Segment(marker, style("ask"))]
        used = len(marker)
        last = len(texts) - 1
        for i, (text, tone) in enumerate(texts):
            if i < last:
                # the gap takes the cell's style: a space reads the same in any colour or
                # weight (same background), and it saves an escape sequence per cell
                text += " " * SEP
            segments.append(Segment(text, style(tone)))
            used += len(text)
        if used < width:
            segments.append(Segment(" " * (width - used), style("")))
        elif used > width:
            return Strip(segments).crop(0, width)
        # one segment per cell, even where neighbours share a style: a changed cell is
        # written from the start of its segment (span_update.py), so a merged segment would
        # drag its neighbours along every time
        return Strip(segments, width)

    def _style(self, tone: str) -> Style:
        """The widget's style + the tone's component style (cached: CSS lookups cost)."""
        style = self._styles.get(tone)
        if style is None:
            style = self.rich_style
            if tone:
                style = style + self.get_component_rich_style(f"run-table--{tone}")
            self._styles[tone] = style
        return style

    def _cursor_style(self, tone: str) -> Style:
        key = f"cursor:{tone}"
        style = self._styles.get(key)
        if style is None:
            style = self._style(tone) + self.get_component_rich_style("run-table--cursor")
            self._styles[key] = style
        return style

    def _forget_rendering(self) -> None:
        self._styles.clear()
        self._strips.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_rendering()

    def on_focus(self) -> None:
        self._forget_rendering()
        self.refresh()

    def on_blur(self) -> None:
        self._forget_rendering()
        self.refresh()

    # ------------------------------------------------------------------ cursor

    def _scroll_cursor_into_view(self) -> None:
        height = self.scrollable_content_region.height
        if height <= 0:
            return
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def move_to(self, pos: int) -> None:
        visible = self.index.visible
        if not visible:
            self.cursor, self.selected_id = 0, None
            self.refresh()
            return
        pos = max(0, min(pos, len(visible) - 1))
        old = self.cursor
        self.cursor = pos
        self.selected_id = visible[pos]
        self._scroll_cursor_into_view()
        self.refresh_line(old)
        self.refresh_line(pos)
        self.post_message(self.Highlighted(self.selected_id))

    def select(self, run_id: str) -> bool:
        pos = self.index.position(run_id)
        if pos is None:
            return False
        self.move_to(pos)
        return True

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, where: int) -> None:
        self.move_to(0 if where == 0 else len(self.index.visible) - 1)

    def action_choose(self) -> None:
        if self.selected_id:
            self.post_message(self.Chosen(self.selected_id))
