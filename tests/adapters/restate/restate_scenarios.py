"""Small helpers the Restate adapter tests share: send an invocation on the ingress, read the
server's own SQL tables, and wait for a condition (a positive signal, never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


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
