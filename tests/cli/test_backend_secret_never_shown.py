"""``irq serve`` with a PostgreSQL password named by ``password_env=``: the adapter uses it
(it tries the database, which is not there, and reports it unreachable), and the secret
shows nowhere: not on the command line (``ps``), not in what ``irq serve`` prints, not in the
backend health frames clients receive, not in ``irq runs`` warnings."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path

import pytest
from cli_harness import irq, start_gateway

from console.client import GatewayClient
from console.processes import HOST, free_port, stop_process

pytestmark = [pytest.mark.slow]


def test_a_password_from_the_environment_is_used_and_never_printed(
    irq_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "pg-" + secrets.token_hex(12)
    monkeypatch.setenv("IRQ_TEST_PGPASS", secret)
    db_port = free_port()  # nothing listens there: the adapter's connection is refused
    url = f"dbos+postgresql://irq@{HOST}:{db_port}/dbos?password_env=IRQ_TEST_PGPASS"
    gateway = start_gateway(irq_home, [url])
    try:
        cmdline = Path(f"/proc/{gateway.process.pid}/cmdline").read_bytes()
        assert b"password_env=IRQ_TEST_PGPASS" in cmdline and secret.encode() not in cmdline

        async def health() -> dict[str, object]:
            async with GatewayClient(gateway.url, gateway.operator, subscribe=False) as client:
                return client.view.backends["dbos:local"].contract()

        deadline = time.monotonic() + 60
        frame = asyncio.run(health())
        while frame.get("error") in (None, "connecting") and time.monotonic() < deadline:
            time.sleep(0.3)
            frame = asyncio.run(health())
        assert frame["reachable"] is False and frame["error"] not in (None, "connecting"), frame
        assert str(db_port) in json.dumps(frame)  # the adapter really tried that database
        assert secret not in json.dumps(frame)

        runs = irq("runs", env=gateway.env(gateway.operator))
        assert "unreachable" in runs.stderr and secret not in runs.stdout + runs.stderr
    finally:
        stop_process(gateway.process)
    served = gateway.log.read_text()
    assert "dbos:local" in served and f"{HOST}:{db_port}/dbos" in served, served
    assert secret not in served
