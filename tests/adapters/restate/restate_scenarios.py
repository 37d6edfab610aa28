"""Small helpers the Restate adapter tests share: send an invocation on the ingress, read the
server's own SQL tables, and wait for a condition (a positive signal, never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from backend_adapters.restate.dev_server import HypercornService, RestateServer

HERE = Path(__file__).parent


@dataclass
class RestateStack:
    server: RestateServer
    service: HypercornService
    steps_file: Path

    def lines(self, inv: str) -> list[str]:
        """What the service's handlers recorded for invocation ``inv`` (outside Restate)."""
        if not self.steps_file.exists():
            return []
        out = []
        for line in self.steps_file.read_text().splitlines():
            head, _, rest = line.partition(" ")
            if head == inv:
                out.append(rest)
        return out


def send(ingress: str, target: str, body: dict[str, Any]) -> str:
    reply = httpx.post(f"{ingress}/{target}/send", json=body, timeout=10)
    reply.raise_for_status()
    return str(reply.json()["invocationId"])


def sql(admin: str, query: str) -> list[dict[str, Any]]:
    reply = httpx.post(
        f"{admin}/query", json={"query": query}, headers={"accept": "application/json"}, timeout=10
    )
    reply.raise_for_status()
    rows: list[dict[str, Any]] = reply.json()["rows"]
    return rows


def invocation(admin: str, inv: str) -> dict[str, Any]:
    rows = sql(admin, f"SELECT * FROM sys_invocation WHERE id = '{inv}'")
    return rows[0] if rows else {}


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.1)
