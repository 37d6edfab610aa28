"""A recording proxy in front of the Restate ingress: every request is passed on unchanged,
and every awakeable resolve and reject is written down (awakeable id, idempotency key, body).

Why: the test service awaits its awakeable once and records the decision it got once, so its
own record cannot show a second delivery (Restate completes an awakeable once and absorbs a
second resolve). What irq *sent* is what exactly-once is about; this tap sees each send."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def _body(raw: bytes) -> Any:
    """A resolve's JSON body, or a reject's text."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


@dataclass(frozen=True)
class Resolve:
    awakeable: str
    key: str | None
    body: Any
    status: int


@dataclass
class IngressTap:
    upstream: str
    resolves: list[Resolve] = field(default_factory=list)
    rejects: list[Resolve] = field(default_factory=list)  # body: the reason (text)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> IngressTap:
        tap = self
        client = httpx.Client(timeout=30)
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                reply = client.request(self.command, tap.upstream.rstrip("/") + self.path,
                                       content=body, headers=headers)
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:2] == ["restate", "awakeables"] and parts[-1] in (
                    "resolve", "reject"
                ):
                    with lock:
                        (tap.resolves if parts[-1] == "resolve" else tap.rejects).append(
                            Resolve(parts[2], self.headers.get("idempotency-key"),
                                    _body(body), reply.status_code))
                self.send_response(reply.status_code)
                for k, v in reply.headers.items():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("content-length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def backend_url(self, admin_url: str, **params: str | float) -> str:
        """A ``restate+`` backend URL whose ingress is this tap."""
        extra = "".join(f"&{k}={v}" for k, v in params.items())
        return f"restate+{admin_url}?ingress={self.url}{extra}"
