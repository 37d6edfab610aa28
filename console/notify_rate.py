"""Rate limit for notifications: at most N per event kind per window, then one summary.

The first event of a kind opens a window of ``window_s`` seconds; the first ``limit`` events
in it are let through, the rest are counted. When the window ends, a kind that held events
back yields one :class:`Summary` ("and 297 more runs turned lost in the last 60 s"). A flood
of 300 events is therefore ``limit`` messages and one summary, never 300. Pure (an injected
clock), shared by the gateway's webhooks and the TUI's bell and desktop notifications.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: how a summary names the events it counts
KIND_PHRASES = {
    "interrupt": "new interrupts",
    "late": "runs turned late",
    "lost": "runs turned lost",
    "leak": "suspected leaks",
    "obligation": "obligations went overdue",
    "test": "test notifications",
}


@dataclass(frozen=True)
class Summary:
    kind: str
    held: int  # events not sent in the window
    window_s: float

    @property
    def message(self) -> str:
        phrase = KIND_PHRASES.get(self.kind, f"{self.kind} events")
        return f"and {self.held} more {phrase} in the last {self.window_s:g} s"


@dataclass
class _Window:
    opened: float
    sent: int = 0
    held: int = 0


class KindRateLimiter:
    def __init__(self, limit: int = 3, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1 or window_s <= 0:
            raise ValueError("limit must be >= 1 and window_s > 0")
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self._windows: dict[str, _Window] = {}

    def admit(self, kind: str) -> bool:
        """True when an event of ``kind`` may be sent now; False when it is held back (it
        counts towards the window's summary)."""
        now = self.clock()
        window = self._windows.get(kind)
        if window is not None and now - window.opened >= self.window_s:
            # the window is over; its summary (if any) is due first, then a new window opens
            return self._admit_after(kind, window, now)
        if window is None:
            window = self._windows[kind] = _Window(opened=now)
        if window.sent < self.limit:
            window.sent += 1
            return True
        window.held += 1
        return False

    def _admit_after(self, kind: str, window: _Window, now: float) -> bool:
        if window.held:  # keep the full window until summaries() reports it; count this one
            window.held += 1
            return False
        self._windows[kind] = _Window(opened=now, sent=1)
        return True

    def summaries(self) -> list[Summary]:
        """One summary per kind whose window has ended with events held back; ended windows
        are closed (the next event opens a new one)."""
        now = self.clock()
        due: list[Summary] = []
        for kind, window in list(self._windows.items()):
            if now - window.opened < self.window_s:
                continue
            if window.held:
                due.append(Summary(kind, window.held, self.window_s))
            del self._windows[kind]
        return due
