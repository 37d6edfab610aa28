"""The background beat of an agent-side run helper (``langgraph/agent.py`` and
``restate/agent.py`` ``AgentRun``): push a heartbeat every interval until the run ends; and
the sequence number every helper's heartbeats carry (:func:`next_seq`).

:meth:`HeartbeatLoop.stop` takes the lock a beat is pushed under, so once it returns no beat
follows: the helper's final report is the run's last frame. It does not join the thread (an
async handler must not block its loop); the thread ends at its next wake-up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def next_seq(previous: int) -> int:
    """The next heartbeat ``seq``: above ``previous`` and at least the wall clock in epoch
    milliseconds, so it keeps increasing across executions of the run (the gateway keeps only
    the newest seq of a run)."""
    return max(previous + 1, int(time.time() * 1000))


class HeartbeatLoop:
    def __init__(self, push: Callable[[], None], *, name: str) -> None:
        self._push = push
        self._name = name
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, interval_s: float) -> None:
        """Push every ``interval_s`` seconds from a daemon thread (the first beat after one
        interval: the helper pushes its first frame itself)."""
        self._thread = threading.Thread(
            target=self._run, args=(interval_s,), name=self._name, daemon=True
        )
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            with self._lock:
                if self._stop.is_set():
                    return
                self._push()

    def stop(self) -> None:
        """No beat is pushed after this returns."""
        with self._lock:
            self._stop.set()
