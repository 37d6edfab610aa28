"""Pending interrupts, oldest first; the selected one's description and arguments below
(beside, on wide terminals)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Markdown, Static

from console.model import Interrupt
from console.terminal_text import terminal_safe
from console.tui.attention import COPY_ID_BINDING
from console.tui.inert_text import inert
from console.tui.interrupt_text import action_preview, args_text, interrupt_header
from console.tui.messages import FleetChange
from console.tui.run_columns import run_label
from console.tui.screens.base import DECISION_BINDINGS, ViewScreen, selected_row_key
from console.tui.state_display import format_age, truncate_middle
from console.tui.widgets.table_fit import column_width, fit_columns

DECISION_KEYS = {"approve": "a", "edit": "e", "reject": "n", "respond": "t"}


class InboxScreen(ViewScreen):
    VIEW_NAME = "inbox"

    BINDINGS = [*DECISION_BINDINGS, COPY_ID_BINDING]

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""
        self._shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="inbox-title", classes="view-title")
        with Vertical(id="inbox-body"):
            table: DataTable[str | Text] = DataTable(cursor_type="row", id="interrupts",
                                                     zebra_stripes=False)
            yield table
            with VerticalScroll(id="interrupt-detail", can_focus=True):
                yield Static("", id="intr-head")
                yield Markdown("", id="intr-description")
                yield Static("", id="intr-args")
        yield from self.compose_bottom()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#interrupts", DataTable)

    def on_mount(self) -> None:
        super().on_mount()
        self.table.add_column("AGE", key="age", width=5)
        self.table.add_column("RUN", key="run", width=22)
        self.table.add_column("TITLE", key="title", width=24)
        self.table.add_column("PROPOSED ACTION", key="action", width=30)
        self.table.add_column("KEYS", key="keys", width=4)
        self._rebuild()
        self.table.focus()

    def on_resize(self) -> None:
        wide = self.size.width >= 140
        self.set_class(wide, "-wide")
        width = self.size.width * 3 // 5 if wide else self.size.width
        fit_columns(self.table, width, {"age": 4, "keys": 4},
                    {"run": (2, 12), "title": (3, 14), "action": (3, 12)})
        if self.table.columns:
            self._rebuild()  # the RUN cells are cut to the column's new width

    def _run_cell(self, intr: Interrupt) -> Text:
        """The run as the fleet's RUN column names it (a LangGraph thread's UUIDv7 ids share
        their first dozen characters: led by the graph's name, cut in the middle)."""
        g = self.irq.glyphs
        run = self.irq.view.runs.get(intr.run_id)
        label = run_label(run, g) if run is not None else intr.run_id.split("/", 1)[-1]
        width = column_width(self.table, "run")
        return inert(truncate_middle(label, width, g.ellipsis) if width > 0 else label)

    def focus_main(self) -> None:
        self.table.focus()

    def _pending(self) -> list[Interrupt]:
        items = self.irq.view.pending_interrupts()
        if self._filter:
            words = self._filter.lower().split()
            items = [i for i in items
                     if all(w in f"{i.id} {i.title} {i.action} {i.description} "
                                 f"{i.policy.rule if i.policy else ''}".lower()
                            for w in words)]
        return items

    def _rebuild(self) -> None:
        table = self.table
        selected = selected_row_key(table)
        items = self._pending()
        now = self.irq.clock()
        table.clear()
        for intr in items:
            keys = "".join(DECISION_KEYS[d.value] for d in intr.allowed_decisions)
            table.add_row(
                format_age((now - intr.created_at).total_seconds()),
                self._run_cell(intr),
                inert(intr.title),
                inert(action_preview(intr, 200)),
                keys,
                key=intr.id,
            )
        self._shown = [i.id for i in items]
        if selected in self._shown:
            table.move_cursor(row=self._shown.index(selected), animate=False)
        total = len(self.irq.view.pending_interrupts())
        title = f" Inbox: {total} pending, oldest first"
        if self._filter:
            title += f"  /{self._filter} ({len(items)} shown)"
        self.query_one("#inbox-title", Static).update(Text(title, style="bold"))
        self._show_detail()
        self.refresh_bindings()

    def selected_interrupt(self) -> Interrupt | None:
        key = selected_row_key(self.table)
        if key is None:
            return None
        intr = self.irq.view.interrupts.get(key)
        return intr if intr is not None and intr.status == "pending" else None

    def selected_run_ids(self) -> list[str]:
        intr = self.selected_interrupt()
        return [intr.run_id] if intr else []

    def _show_detail(self) -> None:
        intr = self.selected_interrupt()
        head = self.query_one("#intr-head", Static)
        desc = self.query_one("#intr-description", Markdown)
        args = self.query_one("#intr-args", Static)
        if intr is None:
            head.update(Text("Nothing waiting for a decision.", style="dim"))
            desc.update("")
            args.update("")
            return
        age = (self.irq.clock() - intr.created_at).total_seconds()
        head.update(interrupt_header(intr, age))
        desc.update(terminal_safe(intr.description, multiline=True) or "_no description_")
        args.update(args_text(intr))

    def fleet_changed(self, change: FleetChange) -> None:
        if change.interrupts or change.runs is None:
            self._rebuild()

    def tick(self) -> None:
        super().tick()
        now = self.irq.clock()
        for intr_id in self._shown:
            intr = self.irq.view.interrupts.get(intr_id)
            if intr is not None:
                self.table.update_cell(intr_id, "age",
                                       format_age((now - intr.created_at).total_seconds()))

    def current_filter(self) -> str:
        return self._filter

    def apply_filter(self, text: str) -> None:
        self._filter = text.strip()
        self._rebuild()

    @on(DataTable.RowHighlighted, "#interrupts")
    def _highlighted(self) -> None:
        self._show_detail()
        self.refresh_bindings()

    @on(DataTable.RowSelected, "#interrupts")
    def _selected(self) -> None:
        intr = self.selected_interrupt()
        if intr is not None:
            self.irq.open_run(intr.run_id)
