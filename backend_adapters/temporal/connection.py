"""The namespace's HTTP API client and its history long polls, opened by ``start()``.

Every part of the adapter (observing, acting, deciding, interrupt discovery) is built with
this connection and reads the client through it at call time: the client is opened by
``start()`` and dropped by ``close()`` (a later ``start()`` opens a new one), so a part built
before the start or used after the close says "not started" instead of holding a stale client.
"""

from __future__ import annotations

from collections.abc import Callable

from backend_adapters.base import Unreachable
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.history_watch import HistoryWatch
from backend_adapters.temporal.http_api import TemporalHttp


class TemporalConnection:
    """The HTTP API client of one namespace and the history watch that shares it."""

    def __init__(self, config: TemporalConfig, on_history_change: Callable[[str], None]) -> None:
        self._config = config
        self._on_history_change = on_history_change
        self._http: TemporalHttp | None = None
        self._watch: HistoryWatch | None = None

    @property
    def http(self) -> TemporalHttp:
        if self._http is None:
            raise Unreachable(f"temporal adapter for {self._config.display_url} not started")
        return self._http

    @property
    def watch(self) -> HistoryWatch | None:
        """The history long polls (None before the first start)."""
        return self._watch

    def open(self) -> TemporalHttp:
        """The client, opened now unless it already is."""
        if self._http is None:
            self._http = TemporalHttp(
                self._config.base_url,
                self._config.namespace,
                api_key=self._config.api_key,
                headers=self._config.headers,
                verify=self._config.verify,
                timeout_s=self._config.timeout_s,
            )
            self._watch = HistoryWatch(
                self._http, self._on_history_change, max_watched=self._config.watch_max
            )
        return self._http

    async def close(self) -> None:
        if self._watch is not None:
            await self._watch.close()
        if self._http is not None:
            await self._http.aclose()
            self._http = None
