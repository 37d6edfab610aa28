"""Plain HTTP on the gateway's own listener: ``/metrics`` (Prometheus), ``/healthz`` and
``/readyz`` (load balancers).

They are answered in websockets' ``process_request`` hook (connections.py), before any
websocket handshake: one port, one TLS setup, bound exactly where the gateway binds, and no
second server to start, stop or secure. ``/healthz`` and ``/readyz`` need no token (a load
balancer has none) and say nothing a peer could not learn by connecting: status, and the
backend contexts by key. ``/metrics`` needs no token either unless ``irq serve
--metrics-token`` (or ``IRQ_METRICS_TOKEN``) set one: then ``Authorization: Bearer TOKEN``.
docs/reliability.md ("Metrics and health") lists what each answer means.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client.exposition import choose_encoder

from console.gateway.auth import bearer_token
from console.gateway.background_loops import FirstReads
from console.gateway.gateway_metrics import GatewayMetrics
from console.gateway.hub import Hub
from console.gateway.metrics_collector import GatewayCollector, JournalFacts
from console.gateway.socket import HandshakeConnection

if TYPE_CHECKING:
    from websockets.http11 import Response

#: how long the journal may take to answer a health check or a scrape's questions
JOURNAL_TIMEOUT_S = 2.0


class HttpEndpoints:
    """The three plain-HTTP paths and their answers."""

    paths = frozenset({"/metrics", "/healthz", "/readyz"})

    def __init__(self, metrics: GatewayMetrics, facts: JournalFacts, hub: Hub,
                 first_reads: FirstReads, *, collector: GatewayCollector | None = None,
                 token: str = "") -> None:
        """``collector``: registered in ``metrics``' registry, prepared before each scrape
        (None: ``/metrics`` is off); ``token``: the bearer token ``/metrics`` asks for ("" for
        none)."""
        self.metrics, self.facts, self.hub = metrics, facts, hub
        self.first_reads, self.collector = first_reads, collector
        self.token = token

    async def answer(self, connection: HandshakeConnection, path: str,
                     headers: Mapping[str, str]) -> Response:
        if path == "/metrics":
            return await self._metrics(connection, headers)
        journal_ok = await self._journal_answers()
        if path == "/healthz":
            return self._health(connection, journal_ok)
        return self._ready(connection, journal_ok)

    async def _journal_answers(self) -> bool:
        """Whether the journal answers a ``SELECT 1`` within JOURNAL_TIMEOUT_S (in a thread:
        a database that hangs holds up this check, not the event loop)."""
        try:
            await asyncio.wait_for(asyncio.to_thread(self.facts.ping), JOURNAL_TIMEOUT_S)
        except Exception:  # timed out, or the database refused: unhealthy either way
            return False
        return True

    def _health(self, connection: HandshakeConnection, journal_ok: bool) -> Response:
        """200 while the gateway serves and its journal answers; 503 otherwise. A backend
        that is down does not make the gateway unhealthy: every gateway would see it alike,
        and a load balancer pulling them all would leave no one to show the outage."""
        backends = self.hub.backends
        body = {
            "status": "ok" if journal_ok else "unavailable",
            "journal": "ok" if journal_ok else "unavailable",
            "backends": {
                "reachable": sorted(k for k, h in backends.items() if h.reachable),
                "unreachable": sorted(k for k, h in backends.items() if not h.reachable),
            },
        }
        return _json(connection, HTTPStatus.OK if journal_ok else HTTPStatus.SERVICE_UNAVAILABLE,
                     body)

    def _ready(self, connection: HandshakeConnection, journal_ok: bool) -> Response:
        """200 once every backend context was polled once (read, or its poll failed: a
        backend that stays down must not keep every gateway out of rotation) and the journal
        answers; 503 before. ``unread``: the contexts not read successfully yet."""
        untried = self.first_reads.untried()
        ready = journal_ok and not untried
        body = {"ready": ready, "journal": "ok" if journal_ok else "unavailable",
                "untried": untried, "unread": sorted(self.first_reads.unread)}
        return _json(connection, HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE,
                     body)

    async def _metrics(self, connection: HandshakeConnection,
                       headers: Mapping[str, str]) -> Response:
        if self.collector is None:
            return connection.respond(HTTPStatus.NOT_FOUND,
                                      "metrics are off (irq serve --no-metrics)\n")
        if self.token and not hmac.compare_digest(
                bearer_token(headers.get("Authorization")) or "", self.token):
            return connection.respond(HTTPStatus.UNAUTHORIZED,
                                      "metrics need the --metrics-token bearer token\n")
        await self.collector.prepare(JOURNAL_TIMEOUT_S)
        encoder, content_type = choose_encoder(headers.get("Accept") or "")
        # on the event loop: the collector reads the hub, which only the loop may touch
        response = connection.respond(HTTPStatus.OK, encoder(self.metrics.registry).decode())
        _content_type(response, content_type)
        return response


def _json(connection: HandshakeConnection, status: HTTPStatus, body: Any) -> Response:
    response = connection.respond(status, orjson.dumps(body).decode() + "\n")
    _content_type(response, "application/json")
    return response


def _content_type(response: Response, value: str) -> None:
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = value
