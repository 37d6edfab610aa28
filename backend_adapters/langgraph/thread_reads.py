"""Reads of one Agent Server thread shared by observing, acting and deciding."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from backend_adapters.base import BackendError, InvalidInput, NotFound
from backend_adapters.langgraph.http_api import AgentServerHttp


class ThreadReads:
    """A thread as the Agent Server holds it now, or once a cancel or resume settled."""

    def __init__(self, http: AgentServerHttp, *, url: str, verify_s: float) -> None:
        self._http = http
        self._url = url
        self._verify_s = verify_s

    async def thread(self, native_id: str) -> dict[str, Any]:
        try:
            return await self._http.thread(native_id)
        except NotFound as exc:
            raise NotFound(
                f"no LangGraph thread {native_id!r} on {self._url}", target=native_id
            ) from exc
        except InvalidInput as exc:  # "Invalid thread ID": not a UUID
            raise NotFound(f"not a LangGraph thread id: {native_id!r}", target=native_id) from exc

    async def settled(self, native_id: str) -> dict[str, Any]:
        """The thread once it is no longer busy (a cancel takes effect within the server's
        next step), or as it is after ``verify_s``."""
        deadline = time.monotonic() + self._verify_s
        while True:
            thread = await self._http.thread(native_id)
            if thread.get("status") != "busy" or time.monotonic() > deadline:
                return thread
            await asyncio.sleep(0.1)

    async def follow(self, native_id: str, run_id: str, seconds: float) -> bool:
        """Follow a run on its SSE join stream for up to ``seconds``: True when the stream
        closed (the run ended or stopped at its next interrupt), False when it is still
        running then (or the stream failed: what was sent was delivered either way)."""
        if seconds <= 0:
            return False
        try:
            async with asyncio.timeout(seconds):
                async with self._http.stream(
                    "GET", f"/threads/{native_id}/runs/{run_id}/stream", timeout_s=seconds + 1
                ) as events:
                    async for _event in events:
                        pass
        except (TimeoutError, BackendError):
            return False
        return True
