"""The way back to agents: which ``/agent`` connections each agent token has open, and the
release requests sent on them that wait for the agent's answer.

The agent channel attaches and detaches connections (agent_channel.py) and hands in the
agents' ``release_result`` frames; the release command (release_commands.py) asks through
:meth:`AgentLinks.ask_release`. Both get the one instance at construction (server.py), so
neither calls the other.

A run's beats come from the token bound to it (agent_beats.py); a request goes to every open
connection of that token (several worker processes may share one) and each helper answers
``unknown_run`` for runs it never reported: the first other answer counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from console.gateway.protocol import dumps
from console.gateway.release_frames import ReleaseResult
from console.gateway.socket import GatewaySocket

log = logging.getLogger("irq.gateway")


@dataclass
class _Asked:
    token_id: str
    waiting: int  # connections asked that have not answered yet
    answer: asyncio.Future[ReleaseResult]
    unknown: list[ReleaseResult] = field(default_factory=list)


class AgentLinks:
    def __init__(self) -> None:
        self.sockets: dict[str, set[GatewaySocket]] = {}  # agent token id -> open connections
        self._asked: dict[str, _Asked] = {}  # release request id -> who may answer it

    def attach(self, token_id: str, ws: GatewaySocket) -> None:
        self.sockets.setdefault(token_id, set()).add(ws)

    def detach(self, token_id: str, ws: GatewaySocket) -> None:
        open_ = self.sockets.get(token_id)
        if open_ is not None:
            open_.discard(ws)
            if not open_:
                del self.sockets[token_id]

    def connected(self, token_id: str | None) -> bool:
        return token_id is not None and bool(self.sockets.get(token_id))

    async def ask_release(self, token_id: str, frame: dict[str, Any],
                          timeout_s: float) -> ReleaseResult | None:
        """Send ``frame`` (release_frames.release_request_frame) to the token's connections;
        the first answer other than ``unknown_run`` (or ``unknown_run`` when every one says
        so); None when none answered within ``timeout_s`` or none is open."""
        targets = list(self.sockets.get(token_id, ()))
        if not targets:
            return None
        request_id = str(frame["id"])
        asked = _Asked(token_id, len(targets), asyncio.get_running_loop().create_future())
        self._asked[request_id] = asked
        try:
            sent = await asyncio.gather(*(_send(ws, dumps(frame)) for ws in targets))
            asked.waiting -= sent.count(False)
            if asked.waiting <= 0:
                return asked.unknown[0] if asked.unknown else None
            return await asyncio.wait_for(asyncio.shield(asked.answer), timeout_s)
        except TimeoutError:
            return asked.unknown[0] if asked.unknown else None
        finally:
            self._asked.pop(request_id, None)

    def answered(self, token_id: str, result: ReleaseResult) -> None:
        """An agent's ``release_result``; ignored unless it answers a request sent to its
        token (another token cannot settle it)."""
        asked = self._asked.get(result.id)
        if asked is None or asked.token_id != token_id or asked.answer.done():
            return
        asked.waiting -= 1
        if result.outcome != "unknown_run":
            asked.answer.set_result(result)
        else:
            asked.unknown.append(result)
            if asked.waiting <= 0:
                asked.answer.set_result(result)


async def _send(ws: GatewaySocket, text: str) -> bool:
    with contextlib.suppress(Exception):  # a connection closing as we send: not asked
        await ws.send(text)
        return True
    log.info("a release request could not be sent on a closing agent connection")
    return False
