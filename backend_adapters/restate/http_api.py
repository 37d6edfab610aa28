"""HTTP calls to a Restate server: admin SQL (``POST /query``), admin invocation control
(``PATCH /invocations/{id}/...``), service metadata, and on the ingress: awakeables and
calls of a workflow's shared handlers.

Every transport error or 5xx becomes :class:`Unreachable`; the caller maps 4xx per call.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from backend_adapters.base import InvalidInput, NotFound, Unreachable


def sql_literal(value: str) -> str:
    """``value`` as a SQL string literal for the admin query endpoint."""
    return "'" + value.replace("'", "''") + "'"


class RestateHttp:
    def __init__(
        self,
        admin_url: str,
        ingress_url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.admin_url = admin_url.rstrip("/")
        self.ingress_url = ingress_url.rstrip("/")
        self._client = httpx.AsyncClient(headers=headers or {}, timeout=timeout_s)

    async def close(self) -> None:
        await self._client.aclose()

    async def _send(self, method: str, url: str, **kw: Any) -> httpx.Response:
        try:
            reply = await self._client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            raise Unreachable(f"{method} {url}: {exc!r}", target=url) from exc
        if reply.status_code >= 500 and not url.endswith("/query"):
            raise Unreachable(f"{method} {url} -> {reply.status_code} {reply.text[:300]}")
        return reply

    async def query(self, sql: str) -> list[dict[str, Any]]:
        """Rows of an admin SQL query (NULL columns are absent from a row)."""
        reply = await self._send(
            "POST",
            f"{self.admin_url}/query",
            json={"query": sql},
            headers={"accept": "application/json"},
        )
        if reply.status_code != 200:
            raise Unreachable(f"SQL query failed ({reply.status_code}): {reply.text[:300]}")
        try:
            rows = reply.json()["rows"]
        except (ValueError, KeyError, TypeError) as exc:
            raise Unreachable(f"SQL reply is not {{'rows': [...]}}: {reply.text[:200]}") from exc
        if not isinstance(rows, list):
            raise Unreachable("SQL reply rows is not a list")
        return [r for r in rows if isinstance(r, dict)]

    async def services(self) -> list[dict[str, Any]]:
        reply = await self._send("GET", f"{self.admin_url}/services")
        if reply.status_code != 200:
            raise Unreachable(f"GET /services -> {reply.status_code}")
        body = reply.json()
        items = body.get("services") if isinstance(body, dict) else None
        return [s for s in items or [] if isinstance(s, dict)]

    async def control(self, invocation_id: str, op: str) -> tuple[int, str]:
        """``PATCH /invocations/{id}/{op}``: (status code, message)."""
        reply = await self._send("PATCH", f"{self.admin_url}/invocations/{invocation_id}/{op}")
        message = ""
        try:
            body = reply.json()
            if isinstance(body, dict):
                message = str(body.get("message") or "")
        except ValueError:
            message = reply.text[:300]
        if reply.status_code == 404:
            raise NotFound(f"no Restate invocation {invocation_id}", target=invocation_id)
        if reply.status_code == 400:
            raise NotFound(f"not a Restate invocation id {invocation_id!r}: {message}")
        return reply.status_code, message

    async def resolve_awakeable(self, awakeable_id: str, value: Any, *, key: str) -> None:
        reply = await self._send(
            "POST",
            f"{self.ingress_url}/restate/awakeables/{awakeable_id}/resolve",
            json=value,
            headers={"idempotency-key": key},
        )
        self._awakeable_reply(awakeable_id, "resolve", reply)

    async def reject_awakeable(self, awakeable_id: str, reason: str, *, key: str) -> None:
        """``POST /restate/awakeables/{id}/reject`` with a text body: the handler's await
        raises ``TerminalError(reason)``."""
        reply = await self._send(
            "POST",
            f"{self.ingress_url}/restate/awakeables/{awakeable_id}/reject",
            content=reason.encode(),
            headers={"idempotency-key": key, "content-type": "text/plain"},
        )
        self._awakeable_reply(awakeable_id, "reject", reply)

    @staticmethod
    def _awakeable_reply(awakeable_id: str, op: str, reply: httpx.Response) -> None:
        if reply.status_code == 400:
            raise InvalidInput(f"the ingress refused awakeable {awakeable_id}: {reply.text[:200]}")
        if reply.status_code not in (200, 202):
            raise Unreachable(f"{op} awakeable -> {reply.status_code} {reply.text[:200]}")

    async def call_handler(
        self, service: str, key: str, handler: str, payload: Any, *, idempotency_key: str
    ) -> tuple[int, str]:
        """``POST /{service}/{key}/{handler}`` (a workflow's shared handler), waiting for its
        result: (status code, the reply's error message or body). Restate runs one call per
        ``idempotency-key`` and answers a repeat with the recorded result. A handler that
        failed answers 4xx/5xx with ``x-restate-error-source: invocation``: that is the
        handler's answer, not an unreachable server."""
        url = f"{self.ingress_url}/{quote(service, safe='')}/{quote(key, safe='')}/" + quote(
            handler, safe="")
        try:
            reply = await self._client.post(
                url, json=payload, headers={"idempotency-key": idempotency_key})
        except httpx.HTTPError as exc:
            raise Unreachable(f"POST {url}: {exc!r}", target=url) from exc
        source = reply.headers.get("x-restate-error-source", "")
        if reply.status_code >= 500 and source != "invocation":
            raise Unreachable(f"POST {url} -> {reply.status_code} {reply.text[:300]}")
        message = reply.text[:500]
        try:
            body = reply.json()
            if isinstance(body, dict) and reply.status_code >= 300:
                message = str(body.get("message") or message)
        except ValueError:
            pass
        return reply.status_code, message

    async def restart_as_new(self, invocation_id: str, from_index: int) -> tuple[int, str]:
        """``PATCH /invocations/{id}/restart-as-new?from=N``: a new invocation with the
        journal entries 0..N (and the completions of the commands among them) copied.
        (status code, the new invocation id on 200, else Restate's message)."""
        reply = await self._send(
            "PATCH",
            f"{self.admin_url}/invocations/{invocation_id}/restart-as-new",
            params={"from": str(from_index)},
        )
        try:
            body = reply.json()
        except ValueError:
            return reply.status_code, reply.text[:300]
        if not isinstance(body, dict):
            return reply.status_code, reply.text[:300]
        if reply.status_code == 200:
            return 200, str(body.get("new_invocation_id") or "")
        return reply.status_code, str(body.get("message") or reply.text[:300])
