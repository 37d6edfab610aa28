"""A tiny local HTTP server standing in for a webhook endpoint (Slack, PagerDuty, ...): it
keeps every JSON body POSTed to it, in arrival order."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Receiver:
    posts: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [p for p in list(self.posts) if p.get("kind") == kind]

    def notify_config(self, events: list[str]) -> str:
        """A ``[notify]`` section routing ``events`` (kinds) to this receiver."""
        quoted = ", ".join(f'"{e}"' for e in events)
        return (f'[notify]\nper_kind = 100\n[[notify.webhooks]]\nurl = "{self.url}"\n'
                f"events = [{quoted}]\n")


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.posts.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
