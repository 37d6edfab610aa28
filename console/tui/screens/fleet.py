"""The fleet: one row per run, a summary of counts per state, sort and filter."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding

from console.model import Interrupt, RunState
from console.terminal_text import terminal_safe
from console.tui.attention import COPY_ID_BINDING
from console.tui.marks import MARK_BINDINGS, Marks
from console.tui.messages import FleetChange
from console.tui.run_rows import SORT_CYCLE
from console.tui.screens.base import (
    DECISION_BINDINGS,
    RUN_BINDINGS,
    ViewScreen,
    oldest_pending_interrupt,
)
from console.tui.widgets.alert_bar import needing_attention
from console.tui.widgets.command_bar import CommandBar
from console.tui.widgets.run_table import RunTable, RunTableHeader
from console.tui.widgets.summary_line import SummaryLine


class FleetScreen(ViewScreen):
    VIEW_NAME = "fleet"

    BINDINGS = [
        # footer room at 80 columns: retry (R) and the decisions are in ? and ^p
        *(replace(b, show=False) if b.action == "retry" else b for b in RUN_BINDINGS),
        *(replace(b, show=False) for b in DECISION_BINDINGS),
        Binding("s", "sort_next", "sort", id="sort"),
        Binding("S", "sort_reverse", "reverse sort", show=False, id="sort_reverse"),
        COPY_ID_BINDING,
        *MARK_BINDINGS,
    ]

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield SummaryLine(self.irq.glyphs, id="summary")
        yield RunTableHeader(id="table-header")
        yield RunTable(self.irq.index, glyphs=self.irq.glyphs, clock=self.irq.liveness_clock,
                       id="runs")
        yield from self.compose_bottom()

    @property
    def table(self) -> RunTable:
        return self.query_one(RunTable)

    _binding_marker: tuple[object, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.marks = Marks()  # space / * (console/tui/marks.py); actions apply to them

    def on_mount(self) -> None:
        super().on_mount()
        self.table.marks = self.marks
        self.table.focus()
        self._refresh_summary()

    def focus_main(self) -> None:
        self.table.focus()

    def fleet_changed(self, change: FleetChange) -> None:
        if len(self.marks) and self.marks.keep_only(self.irq.index.rows):
            self.refresh_bindings()  # marks of runs that disappeared are dropped
        self.table.rows_changed(change.runs, reordered=change.reordered)
        self._refresh_summary()
        self._refresh_bindings_if_needed()

    def _refresh_bindings_if_needed(self) -> None:
        """Decision keys depend on the selection having an interrupt: refresh the footer
        only when that flips (a footer refresh per batch would cost a re-layout)."""
        intr = self.selected_interrupt()
        marker = (self.table.selected_id, intr.id if intr else None,
                  tuple(intr.allowed_decisions) if intr else ())
        if marker != self._binding_marker:
            self._binding_marker = marker
            self.refresh_bindings()

    def tick(self) -> None:
        super().tick()
        self.table.tick()
        self._refresh_summary()

    def _empty_text(self) -> str:
        index, status = self.irq.index, self.irq.status
        if len(index):
            return f"no run matches /{index.query.text} (esc clears the filter)"
        if status.state in ("connecting", "reconnecting"):
            detail = f": {status.detail}" if status.detail else ""
            return f"waiting for the gateway at {self.irq.source.url}{detail}"
        if status.state == "unauthorized":
            return f"the gateway refused the token: {status.detail}"
        return "no runs reported by any backend yet"

    def _refresh_summary(self) -> None:
        index = self.irq.index
        text = self._empty_text() if not index.visible else ""
        if text != self.table.empty_text:
            self.table.empty_text = text
            self.table.refresh()
        self.table.set_alerted(frozenset(
            a.run for a in needing_attention(self.irq.view.alerts.values(), self.irq.clock())
            if a.run))
        self._show_summary_line()
        arrow = self.irq.glyphs.arrow_down if index.reverse else self.irq.glyphs.arrow_up
        header = self.query_one(RunTableHeader)
        column = {"age": "beat", "id": "run", "cost": "res"}  # a sort's column, by key
        header.sort_marker = (column.get(index.sort.value, index.sort.value), arrow)
        header.redraw()

    def _show_summary_line(self) -> None:
        index = self.irq.index
        self.query_one(SummaryLine).show(index.counts, len(index.visible), len(index),
                                         index.sort.value, index.reverse, index.query.text,
                                         marked=len(self.marks), note=self._selected_note())

    def _selected_note(self) -> Text | None:
        """A failed or given-up run under the cursor: its error type and failing step (the
        message and the rest are one Enter away, in the detail's error row)."""
        row = self.irq.index.rows.get(self.table.selected_id or "")
        if row is None or row.state not in (RunState.FAILED, RunState.GIVEN_UP):
            return None
        error = row.run.error
        g = self.irq.glyphs
        note = Text(f"{g.states[row.state]} ", style="bold red")
        if error is None:
            note.append("no error recorded", style="dim")
            return note
        note.append(terminal_safe(error.type or "error"), style="bold red")
        if error.step:
            note.append(terminal_safe(f" at {error.step}"))
        return note

    # ---------------------------------------------------------------- selection

    def selected_run_ids(self) -> list[str]:
        if len(self.marks):
            return self.marks.ids()  # actions apply to the marked rows
        selected = self.table.selected_id
        return [selected] if selected else []

    # -------------------------------------------------------------------- marks

    def marks_changed(self) -> None:
        self.table.refresh()
        self._refresh_summary()
        self.refresh_bindings()

    def action_toggle_mark(self) -> None:
        selected = self.table.selected_id
        if selected:
            self.marks.toggle(selected)
            self.marks_changed()

    def action_mark_shown(self) -> None:
        self.marks.mark_all(list(self.irq.index.visible))
        self.marks_changed()

    def action_back(self) -> None:
        if len(self.marks) and not self.query_one(CommandBar).is_open:
            self.marks.clear()  # esc: marks first, then the filter, then back
            self.marks_changed()
            return
        super().action_back()

    def selected_interrupt(self) -> Interrupt | None:
        selected = self.table.selected_id
        if not selected:
            return None
        return oldest_pending_interrupt(self.irq.view, selected)

    def current_filter(self) -> str:
        return self.irq.index.query.text

    def apply_filter(self, text: str) -> None:
        self.irq.index.set_query(text)
        self.table.rows_changed(None, reordered=True)
        self._refresh_summary()

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        self.irq.index.set_sort(SORT_CYCLE[[k.value for k in SORT_CYCLE].index(key)], reverse)
        self.table.rows_changed(None, reordered=True)
        self._refresh_summary()

    def action_sort_next(self) -> None:
        index = self.irq.index
        nxt = SORT_CYCLE[(SORT_CYCLE.index(index.sort) + 1) % len(SORT_CYCLE)]
        self.sort_by(nxt.value)

    def action_sort_reverse(self) -> None:
        self.sort_by(self.irq.index.sort.value, not self.irq.index.reverse)

    @on(RunTable.Highlighted)
    def _highlighted(self) -> None:
        self._refresh_bindings_if_needed()
        self._show_summary_line()  # a failed run's error follows the cursor

    @on(RunTable.Chosen)
    def _chosen(self, event: RunTable.Chosen) -> None:
        self.irq.open_run(event.run_id)
