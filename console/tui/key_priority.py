"""Keys before redraws: the fleet's batched updates wait while a key is being answered.

The app applies the feed's accumulated changes from a timer (``IrqApp._apply_pending``, 10 a
second) and advances ages from another (1 s). Textual runs a timer's callback in the timer's
own task, between the messages a key press travels through (the app, the focused widget,
its parents, the binding's action, the screen's refresh), so on a loaded machine a key
press paid for whatever flush or tick the scheduler slotted into its path: the index sync
of a hundred changed runs, the table's compare pass, the header. With the process getting a
fraction of a core, each of those milliseconds became several on the key's clock.

:class:`KeyFirst` is the gate those timers consult. A key arriving opens a hold; the hold
ends when the screen has refreshed after the key's action ran (the app settles it from
``call_after_refresh``), or after ``hold_s`` for a key that runs no action (typing in the
command bar). The changes are not lost while held, they keep accumulating and are applied
by the first flush after; and a flush is never held back more than ``max_stale_s`` after the
last one that ran, so a fast typist cannot freeze the fleet.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: how long one key may hold the flushes back if nothing settles it
HOLD_S = 0.25
#: the longest the screen's data may go without a flush, keys or not
MAX_STALE_S = 0.5


class KeyFirst:
    """Whether a periodic redraw should wait for a key being answered."""

    def __init__(self, *, hold_s: float = HOLD_S, max_stale_s: float = MAX_STALE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.hold_s = hold_s
        self.max_stale_s = max_stale_s
        self.clock = clock
        self._held_until = 0.0  # a key's hold ends here (0: no key in flight)
        self._last_flush = clock()
        self.deferred = 0  # flushes put off for a key (for the benchmark and the tests)

    def key_arrived(self) -> None:
        self._held_until = self.clock() + self.hold_s

    def settled(self) -> None:
        """The key's action ran and the screen refreshed after it."""
        self._held_until = 0.0

    @property
    def holding(self) -> bool:
        return self._held_until > self.clock()

    def nothing_waiting(self) -> None:
        """A flush found nothing to apply: the screen's data is current as of now."""
        self._last_flush = self.clock()

    def may_flush(self) -> bool:
        """True: redraw now (and it counts as the last flush); False: a key is in flight."""
        now = self.clock()
        if self._held_until > now and now - self._last_flush < self.max_stale_s:
            self.deferred += 1
            return False
        self._last_flush = now
        return True
