"""``irq notify test`` and ``irq serve --webhook/--notify-config``: a real ``irq serve``
subprocess, a webhook receiver in a thread (http.server), the CLI in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from console.gateway.auth import create_token
from console.model import Role
from console.processes import free_port, stop_process
from tests.cli.cli_harness import ROOT, gateway_ready, irq, irq_process


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posts.append((self.path, dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_notify_test_through_the_gateway_and_direct(irq_home: Path, receiver: Receiver) -> None:
    config = irq_home / "notify.toml"
    config.write_text(
        "[notify]\nper_kind = 2\n[[notify.webhooks]]\n"
        f'url = "{receiver.url}/slack"\nformat = "slack"\nevents = ["lost"]\n'
        'header_env = "Authorization:HOOK_TOKEN"\n')
    admin = create_token(Role.ADMIN, "admin", irq_home)
    viewer = create_token(Role.VIEWER, "viewer", irq_home)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
         "--notify-config", str(config), "--webhook", f"{receiver.url}/json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        env={**os.environ, "IRQ_HOME": str(irq_home), "HOOK_TOKEN": "Bearer t0ken"}, cwd=ROOT)
    url = f"ws://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not gateway_ready(url, admin):
            assert proc.poll() is None and time.monotonic() < deadline, "irq serve did not start"
            time.sleep(0.1)
        out = irq("notify", "test", "--url", url, "--token", admin, "-o", "json")
        assert out.code == 0, out.stderr
        results = json.loads(out.stdout)
        assert [(r["url"], r["ok"]) for r in results] == [
            (f"{receiver.url}/slack", True), (f"{receiver.url}/json", True)]
        by_path = {path: (headers, body) for path, headers, body in receiver.posts}
        assert by_path["/slack"][0]["Authorization"] == "Bearer t0ken"
        assert list(by_path["/slack"][1]) == ["text"]
        assert by_path["/json"][1]["kind"] == "test"
        assert by_path["/json"][1]["gateway"] == url
        denied = irq("notify", "test", "--url", url, "--token", viewer)
        assert denied.code != 0 and "admin" in denied.stderr
    finally:
        stop_process(proc)

    direct = irq("notify", "test", "--webhook", f"{receiver.url}/direct")
    assert direct.code == 0 and "ok" in direct.stdout
    assert receiver.posts[-1][0] == "/direct" and receiver.posts[-1][2]["kind"] == "test"
    down = irq("notify", "test", "--webhook", f"http://127.0.0.1:{free_port()}/x")
    assert down.code == 1 and "failed" in down.stdout


def test_serve_refuses_an_invalid_notify_config(irq_home: Path) -> None:
    bad = irq_home / "bad.toml"
    bad.write_text('[notify]\nbell = ["everything"]\n[[notify.webhooks]]\nurl = "ftp://x"\n')
    result = irq_process("serve", "--port", str(free_port()), "--notify-config", str(bad))
    assert result.returncode == 2
    assert "notify.webhooks.0.url" in result.stderr and "http://" in result.stderr
