"""Marked rows (k9s-style): ``space`` marks the selected row, ``*`` marks every row the filter
shows (again: clears all marks), ``esc`` clears the marks; an action key then applies to the
marked rows, through the same plan + confirm dialog (every target listed, default No) and the
same per-item results dialog as a single run.

Marks of runs that disappear from the fleet are dropped; after a send, the marks of targets
the gateway applied are cleared and the ones that failed stay marked (to retry or inspect).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from textual.binding import Binding

from console.model import CommandResult

MARK_GLYPH = "*"  # ASCII on purpose: the same in IRQ_ASCII mode and on any font

MARK_BINDINGS = [
    Binding("space", "toggle_mark", "mark", show=False, id="mark"),
    Binding("asterisk", "mark_shown", "mark all shown (again: clear)", show=False,
            id="mark_all"),
]


class Marks:
    """The marked ids, in the order they were marked (the confirm dialog lists them so)."""

    def __init__(self) -> None:
        self._ids: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, item: object) -> bool:
        return item in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._ids))

    def ids(self) -> list[str]:
        return list(self._ids)

    def toggle(self, item: str) -> bool:
        """Mark ``item`` or unmark it; True when it is marked now."""
        if item in self._ids:
            del self._ids[item]
            return False
        self._ids[item] = None
        return True

    def mark_all(self, items: Sequence[str]) -> bool:
        """Mark every one of ``items``; when they all are marked already, clear all marks
        instead (``*`` twice). True when marks were added."""
        if items and all(i in self._ids for i in items):
            self.clear()
            return False
        for item in items:
            self._ids.setdefault(item, None)
        return bool(items)

    def clear(self) -> None:
        self._ids.clear()

    def keep_only(self, existing: Iterable[str]) -> bool:
        """Drop the marks of ids not in ``existing`` (runs that disappeared); True if any."""
        alive = set(existing)
        gone = [i for i in self._ids if i not in alive]
        for item in gone:
            del self._ids[item]
        return bool(gone)

    def sent(self, results: Sequence[CommandResult]) -> None:
        """After a send: unmark what the gateway applied; failures stay marked."""
        for result in results:
            if result.outcome in ("applied", "recorded"):
                self._ids.pop(result.target, None)


def clear_sent_marks(screen: object, results: Sequence[CommandResult]) -> None:
    """Called by the app after a send with the screen it was sent from (any view)."""
    marks = getattr(screen, "marks", None)
    if isinstance(marks, Marks) and len(marks):
        marks.sent(results)
        changed = getattr(screen, "marks_changed", None)
        if callable(changed):
            changed()
