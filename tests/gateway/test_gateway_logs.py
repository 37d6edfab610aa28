"""Refused handshakes leave a trace (peer and reason, rate-limited); third-party request logs
(httpx, httpcore, websockets) are off unless the gateway runs with ``--log-level debug``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.model import Role
from console.processes import ChildProcess, free_port


async def _refused(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with pytest.raises(InvalidStatus) as info:
        async with connect(url, additional_headers=headers):
            pass
    return info.value.response.status_code


async def test_refused_handshakes_are_logged_with_peer_and_reason_once_per_interval(
        trust_gateway, caplog):
    caplog.set_level(logging.WARNING, logger="irq.gateway")
    for _ in range(20):
        assert await _refused(trust_gateway.url, "irq_wrong") == 401
    assert await _refused(trust_gateway.url + "/agent", trust_gateway.tokens["operator"]) == 403
    lines = [r.getMessage() for r in caplog.records if "refused handshake" in r.getMessage()]
    assert len(lines) == 2, lines  # 20 bad tokens from one peer: one line
    assert "127.0.0.1" in lines[0] and "HTTP 401 unknown token" in lines[0]
    assert "HTTP 403 role operator (ops) on /agent" in lines[1]
    assert trust_gateway.gateway.handshakes.refused == 21


def _serve(tmp_path: Path, port: int, *extra: str) -> ChildProcess:
    """A gateway whose Temporal backend points at the gateway itself: every poll is an httpx
    request (answered 404), which is what fills a log with one INFO line per request."""
    proc = ChildProcess(
        name="gateway",
        argv=[sys.executable, "-m", "console.cli.app", "serve", "--host", "127.0.0.1",
              "--port", str(port), "--backend", f"dbos+sqlite:///{tmp_path}/none/sys.db?poll=5",
              "--backend", f"temporal+http://127.0.0.1:{port}/default?poll=0.2", *extra],
        log=tmp_path / f"gateway-{port}.log", env={"IRQ_HOME": str(tmp_path)})
    proc.start()
    return proc


async def _connect_once(url: str, token: str, proc: ChildProcess) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.alive(), proc.log_tail()
        try:
            async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}):
                return
        except OSError:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)


@pytest.mark.parametrize(("level", "expect_library_lines"), [(None, False), ("debug", True)])
async def test_library_request_logs_only_at_debug(tmp_path: Path, level, expect_library_lines):
    token = create_token(Role.VIEWER, "v", tmp_path)
    port = free_port()
    proc = _serve(tmp_path, port, *(["--log-level", level] if level else []))
    try:
        url = f"ws://127.0.0.1:{port}"
        await _connect_once(url, token, proc)
        assert await _refused(url, None) == 401
        async with GatewayClient(url, token) as client:  # the Temporal backend was polled
            deadline = time.monotonic() + 30
            while True:
                health = client.view.backends.get("temporal:local")
                if health is not None and health.error not in ("", "connecting"):
                    break
                assert time.monotonic() < deadline, health
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(client.updates(), 1)
        deadline = time.monotonic() + 30
        while "refused handshake" not in proc.log.read_text():  # the gateway's own line
            assert time.monotonic() < deadline, proc.log_tail()
            await asyncio.sleep(0.1)
    finally:
        proc.stop()
    log = proc.log.read_text()
    assert "HTTP 401 no token" in log
    library = [line for line in log.splitlines()
               if " websockets." in line or " httpx:" in line or " httpcore." in line]
    assert bool(library) is expect_library_lines, library[:5]
