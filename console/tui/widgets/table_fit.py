"""Fit a DataTable's columns to a width: fixed columns keep theirs, flexible ones share the
rest by weight (DataTable has no flexible columns of its own)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable


def fit_columns(table: DataTable[Any], width: int, fixed: dict[str, int],
                flex: dict[str, tuple[int, int]]) -> None:
    """``flex`` maps column key -> (weight, minimum width)."""
    if not table.columns or width <= 0:
        return
    padding = 2 * table.cell_padding * len(table.columns) + 1  # + the scrollbar
    room = width - padding - sum(fixed.values())
    total = sum(w for w, _ in flex.values()) or 1
    widths = dict(fixed)
    for key, (weight, minimum) in flex.items():
        widths[key] = max(minimum, room * weight // total)
    for column_key, column in table.columns.items():
        if str(column_key.value) in widths:
            column.auto_width = False
            column.width = widths[str(column_key.value)]
    table.refresh(layout=True)


def column_width(table: DataTable[Any], key: str) -> int:
    """The width a column has now (0: no such column), for cells cut to fit it."""
    return next((c.width for k, c in table.columns.items() if k.value == key), 0)
