"""A view of one list (alerts, jobs, obligations): a title line, a table, and the selected
item's detail under it, filtered by ``/`` (every word in the item's text), the selection kept
across rebuilds, Enter opening what the item is about.

Each screen says what it lists and how: its columns (:class:`Column`: fixed widths, and the
columns that share what the terminal has left), the items, their cells and their searchable
text, the title over them, the detail of one, and what Enter opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from console.terminal_text import terminal_safe
from console.tui.screens.base import ViewScreen, selected_row_key
from console.tui.widgets.table_fit import fit_columns

T = TypeVar("T")


@dataclass(frozen=True)
class Column:
    label: str
    key: str
    width: int
    #: a column that shares the width left: (its weight, its narrowest); None: fixed
    share: tuple[int, int] | None = None


class ListScreen(ViewScreen, Generic[T]):
    #: the ids of its widgets: ``#NAME-title``, ``#NAME-table``, and DETAIL_ID
    NAME: ClassVar[str]
    DETAIL_ID: ClassVar[str]
    COLUMNS: ClassVar[tuple[Column, ...]]
    #: the detail pane when nothing is selected (the list is empty)
    EMPTY: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""
        self._shown: list[str] = []  # the keys of the rows, in order

    # ------------------------------------------------------------ what it lists

    def listed(self) -> list[T]:
        """Every item, in the order shown."""
        raise NotImplementedError

    def key_of(self, item: T) -> str:
        raise NotImplementedError

    def haystack(self, item: T) -> str:
        """The text ``/`` searches (every word must occur in it)."""
        raise NotImplementedError

    def cells(self, item: T) -> tuple[str | Text, ...]:
        raise NotImplementedError

    def headline(self, shown: list[T]) -> Text:
        raise NotImplementedError

    def headline_tail(self) -> Text | None:
        """What the title says after the filter's note (nothing by default)."""
        return None

    def detail(self, item: T) -> Text:
        raise NotImplementedError

    def find(self, key: str) -> T | None:
        raise NotImplementedError

    def open_selected(self) -> None:
        """Enter on a row: open what it is about (nothing by default)."""

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id=f"{self.NAME}-title", classes="view-title")
        table: DataTable[str | Text] = DataTable(cursor_type="row", id=f"{self.NAME}-table",
                                                 zebra_stripes=False, classes="list-table")
        yield table
        yield Static("", id=self.DETAIL_ID, classes="list-detail")
        yield from self.compose_bottom()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one(f"#{self.NAME}-table", DataTable)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.table
        for col in self.COLUMNS:
            table.add_column(col.label, key=col.key, width=col.width)
        self._rebuild()
        table.focus()

    def on_resize(self) -> None:
        fit_columns(self.table, self.size.width,
                    {c.key: c.width for c in self.COLUMNS if c.share is None},
                    {c.key: c.share for c in self.COLUMNS if c.share is not None})
        if self.table.columns:
            self._rebuild()  # cells cut to their column's width (column_width) are cut anew

    def focus_main(self) -> None:
        self.table.focus()

    # -------------------------------------------------------------------- rows

    def items(self) -> list[T]:
        """The items shown: :meth:`listed`, filtered."""
        items = self.listed()
        if self._filter:
            words = self._filter.lower().split()
            items = [i for i in items if all(w in self.haystack(i).lower() for w in words)]
        return items

    def _rebuild(self) -> None:
        table = self.table
        selected = selected_row_key(table)
        items = self.items()
        table.clear()
        for item in items:
            table.add_row(*self.cells(item), key=self.key_of(item))
        self._shown = [self.key_of(i) for i in items]
        if selected in self._shown:
            table.move_cursor(row=self._shown.index(selected), animate=False)
        self.draw_title(items)
        self.show_detail()
        self.refresh_bindings()

    def draw_title(self, shown: list[T]) -> None:
        title = self.headline(shown)
        if self._filter:
            title.append(terminal_safe(f"  /{self._filter} ({len(shown)} shown)"))
        tail = self.headline_tail()
        if tail is not None:
            title.append_text(tail)
        self.query_one(f"#{self.NAME}-title", Static).update(title)

    def selected_item(self) -> T | None:
        key = selected_row_key(self.table)
        return self.find(key) if key is not None else None

    def show_detail(self) -> None:
        pane = self.query_one(f"#{self.DETAIL_ID}", Static)
        item = self.selected_item()
        pane.update(Text(self.EMPTY, style="dim") if item is None else self.detail(item))

    def selected_run_ids(self) -> list[str]:
        return []

    def current_filter(self) -> str:
        return self._filter

    def apply_filter(self, text: str) -> None:
        self._filter = text.strip()
        self._rebuild()

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self.show_detail()
        self.refresh_bindings()

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.open_selected()
