"""Giving the C heap's freed pages back to the system after a poll that reported many runs.

An adapter's first report of a large fleet builds all its runs at once (100,000 pydantic
models, ~2 KiB each); the index keeps a fraction of that, and glibc's malloc keeps the rest
of the freed memory mapped (free chunks between live ones are not returned until
``malloc_trim``): 200 MB of a gateway at 100,000 runs was such memory. ``malloc_trim`` walks
the heap once (~10 ms at 100,000 runs); elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

#: a poll reporting at least this many runs is followed by a release, and an index of at
#: least this many runs is released every RELEASE_EVERY_S (its churn frees memory too)
RELEASE_AFTER_RUNS = 10_000
RELEASE_EVERY_S = 5.0


_NOT_LOADED: Any = object()
_trim: Any = _NOT_LOADED


def _load_trim() -> Callable[[int], int] | None:
    # the symbols the process already has (libc's among them): no ``find_library``, which
    # runs ldconfig in a subprocess
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return None
    return trim


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system (False: not glibc, nothing done)."""
    global _trim
    if _trim is _NOT_LOADED:
        _trim = _load_trim()
    if _trim is None:
        return False
    _trim(0)
    return True
