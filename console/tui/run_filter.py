"""The ``/`` filter: the grammar lives in :mod:`console.run_filter` (shared with the CLI's
``--filter``); this module re-exports it for the TUI."""

from __future__ import annotations

from console.run_filter import (
    KEYS,
    STATE_ALIASES,
    FilterQuery,
    Term,
    haystack_of,
    interrupt_haystack_of,
    run_age_s,
)

__all__ = [
    "KEYS",
    "STATE_ALIASES",
    "FilterQuery",
    "Term",
    "haystack_of",
    "interrupt_haystack_of",
    "run_age_s",
]
