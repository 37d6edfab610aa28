"""Shared pieces of the gateway policy tests: policy files, a client on ``/``, waiting."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

POLICY = """
default = "permit"

[tool_classes]
export = []

[tools]
export_report = ["export"]

[data_classes]
phi = ["sensitive"]

[datasets.patients]
classes = ["phi"]

[[rules]]
id = "refund-large"
modality = "require_approval"
action = ["refund"]
condition = "args.amount > 100"
description = "refunds over 100 EUR need an operator"

[[rules]]
id = "no-backup-delete"
modality = "prohibit"
action = ["delete_backup"]
priority = 10

[[rules]]
id = "phi-read-notify"
modality = "oblige"
action = ["read_records"]
object = ["phi"]
what = "notify the CISO"
within_s = 600
"""

BROKEN_CONDITION = POLICY.replace('condition = "args.amount > 100"',
                                  'condition = "args.amount >"')


class Client:
    """A subscribed client on ``/``: requests by id, events collected as they come."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.snapshot: dict[str, Any] = {}
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = json.loads(raw)
            if frame["type"] == "snapshot":
                self.snapshot = frame
            elif frame["type"] == "events":
                self.events.extend(frame["events"])
            elif frame.get("id") in self._answers or frame.get("ref") in self._answers:
                self._answers[frame.get("id") or frame["ref"]].set_result(frame)

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        frame.setdefault("id", uuid.uuid4().hex)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[frame["id"]] = future
        await self.ws.send(json.dumps(frame))
        return await asyncio.wait_for(future, 10)

    async def query(self, what: str, **fields: Any) -> dict[str, Any]:
        return await self.request({"type": "query", "what": what, **fields})

    async def command(self, action: str, targets: list[str], reason: str = "",
                      key: str | None = None) -> dict[str, Any]:
        return await self.request({"type": "command", "id": key or uuid.uuid4().hex,
                                   "action": action, "targets": targets, "reason": reason})

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e["data"] for e in self.events if e["kind"] == kind]


@asynccontextmanager
async def client(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url, additional_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "client": "test"}))
        welcome = json.loads(await ws.recv())
        assert welcome["type"] == "welcome"
        c = Client(ws)
        try:
            yield c
        finally:
            c._reader.cancel()


async def until(predicate: Callable[[], Any], what: str, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
