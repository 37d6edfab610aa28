"""The Agent Server's HTTP API as irq uses it (httpx), with deadlines and typed errors.

Every failure becomes a ``backend_adapters.base`` error: connection refused, no answer within
the deadline, 5xx or an answer that is not JSON -> ``Unreachable``; 404 -> ``NotFound``;
409 (a thread already running a task, with ``multitask_strategy: reject``) -> ``Conflict``;
400/422 -> ``InvalidInput``. The optional API key goes in the ``x-api-key`` header.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from backend_adapters.base import Conflict, InvalidInput, NotFound, Unreachable

#: what POST /threads/search may select (the server refuses "error")
THREAD_FIELDS = [
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "status",
    "interrupts",
]


class AgentServerHttp:
    """One Agent Server: ``base_url`` like ``http://127.0.0.1:2024``."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        all_headers = dict(headers or {})
        if api_key:
            all_headers["x-api-key"] = api_key
        self._headers = all_headers
        self._client: httpx.AsyncClient | None = None
        self.requests = 0  # sent so far (benchmarks, tests)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=self._headers, timeout=self.timeout_s
            )
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One request; the parsed JSON answer, or a typed error."""
        self.requests += 1
        try:
            r = await self._http().request(
                method,
                path,
                json=json,
                params=params,
                timeout=timeout_s if timeout_s is not None else self.timeout_s,
            )
        except httpx.TimeoutException as exc:
            raise Unreachable(
                f"LangGraph Agent Server {self.base_url} did not answer {method} {path} "
                f"within {timeout_s or self.timeout_s:g}s",
                target=self.base_url,
            ) from exc
        except httpx.HTTPError as exc:
            raise Unreachable(
                f"LangGraph Agent Server {self.base_url} unreachable: {type(exc).__name__}: "
                f"{exc}"[:500],
                target=self.base_url,
            ) from exc
        return _answer(r, method, path, self.base_url)

    @asynccontextmanager
    async def stream(
        self, method: str, path: str, *, json: Any = None, timeout_s: float | None = None
    ) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
        """An SSE stream of the server (``httpx-sse``): yields the iterator of its events."""
        self.requests += 1
        timeout = httpx.Timeout(self.timeout_s, read=timeout_s)
        try:
            async with aconnect_sse(
                self._http(), method, path, json=json, timeout=timeout
            ) as source:
                if source.response.status_code >= 400:
                    await source.response.aread()
                    _answer(source.response, method, path, self.base_url)
                yield source.aiter_sse()
        except httpx.TimeoutException as exc:
            raise Unreachable(f"{self.base_url}: {method} {path} stream went silent") from exc
        except httpx.HTTPError as exc:
            raise Unreachable(f"{self.base_url}: {method} {path} stream failed: {exc}") from exc

    # ------------------------------------------------------------------ the calls irq makes

    async def ok(self) -> bool:
        return bool((await self.call("GET", "/ok") or {}).get("ok"))

    async def metrics(self) -> dict[str, Any]:
        answer = await self.call("GET", "/metrics", params={"format": "json"})
        return answer if isinstance(answer, dict) else {}

    async def search_threads(
        self, *, status: str | None = None, limit: int = 500, offset: int = 0
    ) -> list[dict[str, Any]]:
        body: dict[str, Any] = {
            "limit": limit,
            "offset": offset,
            "sort_by": "updated_at",
            "sort_order": "desc",
            "select": THREAD_FIELDS,
        }
        if status:
            body["status"] = status
        return _list_of_dicts(await self.call("POST", "/threads/search", json=body))

    async def thread(self, thread_id: str) -> dict[str, Any]:
        return _dict(await self.call("GET", f"/threads/{thread_id}"))

    async def state(self, thread_id: str) -> dict[str, Any]:
        return _dict(await self.call("GET", f"/threads/{thread_id}/state"))

    async def assistant_graph(self, assistant_id: str) -> dict[str, Any]:
        """The graph as the server draws it: nodes carry ``metadata.__interrupt`` =
        ``before`` / ``after`` / ``before,after`` for compile-time breakpoints."""
        return _dict(await self.call("GET", f"/assistants/{assistant_id}/graph"))

    async def history(self, thread_id: str, limit: int = 100) -> list[dict[str, Any]]:
        return _list_of_dicts(
            await self.call("POST", f"/threads/{thread_id}/history", json={"limit": limit})
        )

    async def runs(self, thread_id: str, limit: int = 100) -> list[dict[str, Any]]:
        return _list_of_dicts(
            await self.call("GET", f"/threads/{thread_id}/runs", params={"limit": limit})
        )

    async def create_run(self, thread_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return _dict(await self.call("POST", f"/threads/{thread_id}/runs", json=body))

    async def cancel_run(self, thread_id: str, run_id: str, action: str = "interrupt") -> None:
        await self.call(
            "POST",
            f"/threads/{thread_id}/runs/{run_id}/cancel",
            params={"action": action, "wait": "true"},
            timeout_s=max(self.timeout_s, 10.0),
        )

    async def patch_metadata(self, thread_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
        return _dict(await self.call("PATCH", f"/threads/{thread_id}", json={"metadata": metadata}))

    async def update_state(self, thread_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return _dict(await self.call("POST", f"/threads/{thread_id}/state", json=body))


def _answer(r: httpx.Response, method: str, path: str, base_url: str) -> Any:
    where = f"{method} {path}"
    detail = _detail(r)
    if r.status_code == 404:
        raise NotFound(f"{where}: {detail or 'not found'}", target=path)
    if r.status_code == 409:
        raise Conflict(f"{where}: {detail or 'conflict'}", target=path)
    if r.status_code in (400, 422):
        raise InvalidInput(f"{where}: {detail or 'rejected'}", target=path)
    if r.status_code in (401, 403):
        raise Unreachable(f"{base_url} refused {where} ({r.status_code}): {detail}", target=path)
    if r.status_code >= 400:
        raise Unreachable(f"{base_url}: {where} answered {r.status_code}: {detail}"[:500])
    if not r.content:
        return None
    try:
        return r.json()
    except ValueError as exc:
        raise Unreachable(
            f"{base_url}: {where} answered something that is not JSON: {r.text[:200]!r}"
        ) from exc


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:300]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:300]
    return str(body)[:300]


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Unreachable(f"the Agent Server answered {type(value).__name__}, not an object")
    return value


def _list_of_dicts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise Unreachable(f"the Agent Server answered {type(value).__name__}, not a list")
    return [v for v in value if isinstance(v, dict)]
