"""History long polls for the runs under watch (the only server push over Temporal's HTTP API).

``GET .../history?waitNewEvent=true&nextPageToken=T`` blocks until the workflow gets a new
event (or answers empty after 20 s). Heartbeats, attempts and pause state are never events, so
a long poll only tells *that* something happened (a signal, an update, an activity completing,
the close); the adapter then describes that run first on its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from backend_adapters.base import BackendError, NotFound
from backend_adapters.temporal.http_api import SERVER_LONG_POLL_S, TemporalHttp


class HistoryWatch:
    """Follows the history of at most ``max_watched`` workflows; calls ``on_change(wid)``."""

    def __init__(
        self,
        http: TemporalHttp,
        on_change: Callable[[str], None],
        *,
        max_watched: int = 8,
        retry_s: float = 2.0,
    ) -> None:
        self._http = http
        self._on_change = on_change
        self.max_watched = max_watched
        self._retry_s = retry_s
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def watched(self) -> set[str]:
        return {wid for wid, task in self._tasks.items() if not task.done()}

    def watch(self, workflow_ids: set[str]) -> None:
        """Follow exactly these workflows (the first ``max_watched`` of them, sorted)."""
        wanted = set(sorted(workflow_ids)[: self.max_watched])
        for wid in list(self._tasks):
            if wid not in wanted:
                self._tasks.pop(wid).cancel()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: observe() calls watch() again from inside one
        for wid in wanted:
            task = self._tasks.get(wid)
            if task is None or task.done():
                self._tasks[wid] = asyncio.create_task(self._follow(wid), name=f"irq-watch-{wid}")

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _follow(self, wid: str) -> None:
        token: str | None = None
        first = True
        while True:
            try:
                data = await self._http.history(
                    wid,
                    wait_new_event=True,
                    next_page_token=token,
                    page_size=1000,
                    timeout_s=SERVER_LONG_POLL_S + 5.0,
                )
            except NotFound:
                self._on_change(wid)
                return
            except BackendError:
                await asyncio.sleep(self._retry_s)
                continue
            events = (data.get("history") or {}).get("events") or []
            if events and not first:
                self._on_change(wid)
            first = False
            next_token = data.get("nextPageToken")
            if not next_token:  # closed: no more events will come
                self._on_change(wid)
                return
            token = str(next_token)
