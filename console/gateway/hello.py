"""The first frame of every session, on ``/`` and on ``/agent``: a hello in our protocol
version within HELLO_TIMEOUT_S, or the connection is closed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from console.gateway.protocol import PROTOCOL_VERSION, FrameError, Hello, error_frame
from console.gateway.socket import GatewaySocket, Message

HELLO_TIMEOUT_S = 10.0  # on / and on /agent

#: a frame parser of protocol.py (``parse_client_frame``, ``parse_agent_frame``)
FrameParser = Callable[[Message, int], object]


async def await_hello(ws: GatewaySocket, parse: FrameParser,
                      max_frame_bytes: int) -> Hello | None:
    """The session's hello; None: the connection was closed (no hello in time, or another
    protocol version). Frames before the hello are answered ``expected_hello``."""
    while True:
        try:
            raw = await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT_S)
        except TimeoutError:
            await ws.close(1008, "no hello")
            return None
        try:
            msg = parse(raw, max_frame_bytes)
        except FrameError as exc:
            await ws.send(error_frame(exc.code, exc.message, exc.ref))
            continue
        if isinstance(msg, Hello):
            if msg.protocol != PROTOCOL_VERSION:
                await ws.send(error_frame(
                    "unsupported_protocol",
                    f"gateway speaks protocol {PROTOCOL_VERSION}, client {msg.protocol}"))
                await ws.close(1002, "protocol version")
                return None
            return msg
        await ws.send(error_frame("expected_hello", "send a hello frame first",
                                  getattr(msg, "id", None)))
