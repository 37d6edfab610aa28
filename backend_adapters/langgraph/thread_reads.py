"""Reads of one Agent Server thread shared by observing, acting and deciding."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from backend_adapters.base import ActionOutcome, BackendError, Conflict, InvalidInput, NotFound
from backend_adapters.langgraph.conventions import (
    META_BY,
    META_COMMAND,
    META_DECISION,
    META_INTERRUPT,
)
from backend_adapters.langgraph.http_api import AgentServerHttp
from console.model import Interrupt


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


async def earlier_delivery(http: AgentServerHttp, tid: str, interrupt: Interrupt, key: str,
                           *, did: str, what: str) -> ActionOutcome | None:
    """irq's own earlier run for this interrupt (its metadata names the interrupt and the
    command): this command's, "already delivered"; another command's, a Conflict (decided
    elsewhere); None when no run of irq's answered it. ``did``/``what`` word the outcome
    ("resumed"/"interrupt", "continued"/"breakpoint")."""
    for run in await http.runs(tid, limit=100):
        meta = run.get("metadata") if isinstance(run.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        if meta.get(META_INTERRUPT) != interrupt.native_id:
            continue
        if meta.get(META_COMMAND) == key:
            return ActionOutcome(
                detail=(
                    f"already delivered: run {run.get('run_id')} {did} {what} "
                    f"{interrupt.native_id} with this command ({run.get('status')})"
                )
            )
        raise Conflict(
            f"{what} {interrupt.native_id} was already decided "
            f"({meta.get(META_DECISION)} by {meta.get(META_BY) or '?'})",
            target=interrupt.id,
        )
    return None
