"""Connections and who they are: the bearer token checked at the handshake (HTTP 401 for a
missing or unknown token, 403 for a wrong role, both logged rate-limited with the peer),
each accepted connection handed to its session (``/`` clients, ``/agent`` agents), and
connections whose token was revoked or expired closed within a second."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from console.gateway.agent_channel import AgentChannel
from console.gateway.auth import Principal, TokenStore, bearer_token
from console.gateway.client_sessions import ClientSessions
from console.gateway.http_endpoints import HttpEndpoints
from console.gateway.socket import GatewaySocket, HandshakeConnection, HandshakeRequest
from console.model import Role

if TYPE_CHECKING:
    from websockets.http11 import Response

log = logging.getLogger("irq.gateway")

HANDSHAKE_LOG_INTERVAL_S = 10.0  # refused handshakes: one log line per peer and reason


class HandshakeLog:
    """Logs refused handshakes with peer and reason, at most one line per (peer, status,
    reason) per interval, with the count of the ones it held back."""

    def __init__(self, interval_s: float = HANDSHAKE_LOG_INTERVAL_S, max_keys: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s, self.max_keys, self.clock = interval_s, max_keys, clock
        self._last: dict[tuple[str, int, str], tuple[float, int]] = {}
        self.refused = 0

    def refused_handshake(self, peer: str, status: int, reason: str, path: str) -> None:
        self.refused += 1
        key = (peer.rsplit(":", 1)[0], status, reason)  # per host: each attempt has a new port
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return
        held = last[1] if last is not None else 0
        if len(self._last) >= self.max_keys:
            self._last.clear()
        self._last[key] = (now, 0)
        log.warning("refused handshake from %s on %s: HTTP %d %s%s", peer, path, status, reason,
                    f" ({held} more like it in the last {self.interval_s:g} s)" if held else "")


class Connections:
    """The websockets server's two callbacks (``process_request`` and the connection
    handler) and the open connections with the principal each one authenticated as."""

    def __init__(self, tokens: TokenStore, handshakes: HandshakeLog, clients: ClientSessions,
                 agent_channel: AgentChannel, counters: Counter[str],
                 endpoints: HttpEndpoints | None = None) -> None:
        """``endpoints``: ``/metrics``, ``/healthz``, ``/readyz`` (plain HTTP on this
        listener); without them ``/healthz`` answers a bare 200."""
        self.tokens, self.handshakes, self.counters = tokens, handshakes, counters
        self.endpoints = endpoints
        self.clients, self.agent_channel = clients, agent_channel
        self.open_sessions: dict[GatewaySocket, Principal] = {}  # token lifecycle
        self._closing: set[asyncio.Task[None]] = set()

    def process_request(self, connection: HandshakeConnection,
                        request: HandshakeRequest) -> Response | Awaitable[Response] | None:
        path = urlsplit(request.path).path
        if self.endpoints is not None and path in self.endpoints.paths:
            return self.endpoints.answer(connection, path, request.headers)
        if path == "/healthz":
            return connection.respond(HTTPStatus.OK, "ok\n")
        if path not in ("/", "/agent"):
            return connection.respond(HTTPStatus.NOT_FOUND, "unknown path\n")
        principal, why = self.tokens.check(bearer_token(request.headers.get("Authorization")))
        if principal is None:
            body = (f"{why}: this token was {why} (irq token list; irq token create --role R)\n"
                    if why in ("expired", "revoked") else
                    "missing or unknown token (irq token create --role R)\n")
            return self._refuse(connection, path, HTTPStatus.UNAUTHORIZED, why, body)
        if path == "/agent" and principal.role is not Role.AGENT:
            return self._refuse(
                connection, path, HTTPStatus.FORBIDDEN,
                f"role {principal.role.value} ({principal.identity}) on /agent",
                "only agent tokens push heartbeats (irq token create --role agent --scope "
                "BACKEND:CONTEXT); operators act through commands on /\n")
        if path == "/" and principal.role is Role.AGENT:
            return self._refuse(connection, path, HTTPStatus.FORBIDDEN,
                                f"agent token ({principal.identity}) on /",
                                "an agent token cannot connect here\n")
        with contextlib.suppress(OSError, ValueError):  # last use is informative only
            self.tokens.record_use(principal)
        return None

    def _refuse(self, connection: HandshakeConnection, path: str, status: HTTPStatus,
                reason: str, body: str) -> Response:
        peer = connection.remote_address
        host = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        self.counters[f"handshake_{status.value}"] += 1
        self.handshakes.refused_handshake(host, status.value, reason, path)
        return connection.respond(status, body)

    def _principal(self, request: HandshakeRequest) -> Principal | None:
        return self.tokens.authenticate(bearer_token(request.headers.get("Authorization")))

    async def handle(self, ws: GatewaySocket) -> None:
        request = ws.request  # never None here: websockets calls this after the handshake
        principal = None if request is None else self._principal(request)
        if request is None or principal is None:  # token revoked between handshake and here
            await ws.close(1008, "token revoked or expired")
            return
        self.open_sessions[ws] = principal
        try:
            if urlsplit(request.path).path == "/agent":
                await self.agent_channel.session(ws, principal)
            else:
                await self.clients.session(ws, principal)
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if not isinstance(exc, ConnectionClosed):
                log.exception("session failed")
        finally:
            self.open_sessions.pop(ws, None)

    def close_revoked(self) -> None:
        """Close, within a second, every open connection whose token was revoked or expired."""
        for ws, who in list(self.open_sessions.items()):
            if not self.tokens.still_valid(who):
                self.open_sessions.pop(ws, None)
                log.info("closing the connection of %s: its token was revoked or expired",
                         who.identity)
                task = asyncio.create_task(ws.close(1008, "token revoked or expired"))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
