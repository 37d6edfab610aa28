"""A raw agent-channel client for the trust tests: send a frame, learn whether it was refused.

Accepted heartbeats are not acknowledged, so every frame is followed by a ping: the error
frame (if any) arrives before the pong, on the same connection."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

_ids = itertools.count()


class AgentWire:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send_raw(self, raw: str) -> dict[str, Any] | None:
        """Send ``raw``, then a ping; the error frame that came back before the pong, or None."""
        ping = f"p{next(_ids)}"
        await self.ws.send(raw)
        await self.ws.send(json.dumps({"type": "ping", "id": ping}))
        error = None
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if reply == {"type": "pong", "id": ping}:
                return error
            if reply.get("type") == "error":
                error = reply

    async def beat(self, native_id: str, **fields: Any) -> dict[str, Any] | None:
        return await self.send_raw(json.dumps(beat(native_id, **fields)))


def beat(native_id: str, **fields: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "type": "heartbeat", "backend": "dbos", "context": "local", "native_id": native_id,
        "seq": int(datetime.now(UTC).timestamp() * 1000), "at": datetime.now(UTC).isoformat(),
        "progress": 0.5, "interval_s": 2.0, "timeout_s": 10.0, "phase": "running",
    }
    frame.update(fields)
    return frame


@asynccontextmanager
async def agent(url: str, token: str) -> AsyncIterator[AgentWire]:
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url + "/agent", additional_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "client": "test"}))
        yield AgentWire(ws)
