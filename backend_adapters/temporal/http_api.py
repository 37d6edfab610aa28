"""A small async client for Temporal's HTTP API (``/api/v1/namespaces/{ns}/...``), httpx only.

Every call has a deadline. Transport errors, timeouts, 5xx/429 and bodies that are not JSON
objects become :class:`~backend_adapters.base.Unreachable` (the gateway shows the context as
stale and keeps polling); 404 becomes ``NotFound`` (or ``Conflict`` for "already completed"),
400 ``InvalidInput``. Requests are counted per kind so the request rate can be measured.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from backend_adapters.base import (
    BackendError,
    Conflict,
    InvalidInput,
    NotFound,
    Unreachable,
)

UPDATE_STAGE_COMPLETED = "UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED"
#: the server holds an update request at most this long (then answers stage ADMITTED)
SERVER_UPDATE_WAIT_S = 20.0
#: the server holds a history long poll at most this long (then answers empty)
SERVER_LONG_POLL_S = 20.0


class QueryFailed(BackendError):
    """A workflow query got no answer (no worker polling, unknown query, handler error)."""

    code = "query_failed"


@dataclass
class RequestStats:
    """Requests sent to Temporal, by kind, with send times for rate measurement."""

    by_kind: Counter[str] = field(default_factory=Counter)
    sent_at: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    errors: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def record(self, kind: str) -> None:
        self.by_kind[kind] += 1
        self.sent_at.append(time.monotonic())

    def rate(self, window_s: float = 10.0, now: float | None = None) -> float:
        """Requests per second over the last ``window_s`` seconds."""
        now = time.monotonic() if now is None else now
        recent = sum(1 for t in self.sent_at if now - t <= window_s)
        return recent / window_s


def _path(value: str) -> str:
    return quote(value, safe="")


class TemporalHttp:
    """Temporal's HTTP API for one namespace."""

    def __init__(
        self,
        base_url: str,
        namespace: str,
        *,
        api_key: str | None = None,
        verify: bool | str = True,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.namespace = namespace
        self.timeout_s = timeout_s
        sent = {"Accept": "application/json", **dict(headers)}  # headers: from header_env=
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=sent,
            verify=verify,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 3.0)),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
            transport=transport,
        )
        self.stats = RequestStats()

    @property
    def ns_path(self) -> str:
        return f"/api/v1/namespaces/{_path(self.namespace)}"

    async def aclose(self) -> None:
        await self._client.aclose()

    # ----------------------------------------------------------------- transport

    async def request(
        self,
        method: str,
        path: str,
        *,
        kind: str,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """One call; returns the JSON object or raises a typed BackendError."""
        self.stats.record(kind)
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 3.0)) if timeout_s else None
        try:
            response = await self._client.request(
                method,
                path,
                params=params,
                json=body,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TimeoutException as exc:
            self.stats.errors += 1
            raise Unreachable(
                f"temporal at {self.base_url} did not answer {kind} within "
                f"{timeout_s or self.timeout_s:g}s ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            self.stats.errors += 1
            raise Unreachable(f"temporal at {self.base_url} unreachable: {exc!r}") from exc
        return self._decode(response, kind)

    def _decode(self, response: httpx.Response, kind: str) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            data = None
        status = response.status_code
        if status == 200:
            if not isinstance(data, dict):
                self.stats.errors += 1
                raise Unreachable(
                    f"temporal {kind}: answer is not a JSON object "
                    f"({response.text[:80]!r}); is {self.base_url} Temporal's HTTP API?"
                )
            return data
        self.stats.errors += 1
        if not isinstance(data, dict):
            raise Unreachable(
                f"temporal {kind}: HTTP {status} with a body that is not Temporal's JSON "
                f"({response.text[:80]!r}); is {self.base_url} Temporal's HTTP API?"
            )
        message = str(data.get("message") or "")
        message = message or response.text[:200] or response.reason_phrase
        detail = f"temporal {kind}: HTTP {status}: {message}"
        if status == 404:
            if "already completed" in message:
                raise Conflict(detail)
            raise NotFound(detail)
        if status == 400:
            raise InvalidInput(detail)
        if status in (409, 412):
            raise Conflict(detail)
        if status == 504 and kind == "query":
            raise QueryFailed(detail)
        if status >= 500 or status == 429:
            raise Unreachable(detail)
        raise BackendError(detail)

    # ----------------------------------------------------------------- reads

    async def system_info(self) -> dict[str, Any]:
        return await self.request("GET", "/api/v1/system-info", kind="system_info")

    async def describe_namespace(self) -> dict[str, Any]:
        return await self.request("GET", self.ns_path, kind="namespace")

    async def search_attributes(self) -> dict[str, Any]:
        return await self.request("GET", f"{self.ns_path}/search-attributes", kind="search_attrs")

    async def list_workflows(
        self, query: str, *, page_size: int = 1000, next_page_token: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"query": query, "pageSize": page_size}
        if next_page_token:
            params["nextPageToken"] = next_page_token
        return await self.request("GET", f"{self.ns_path}/workflows", kind="list", params=params)

    async def count_workflows(self, query: str) -> dict[str, Any]:
        return await self.request(
            "GET", f"{self.ns_path}/workflow-count", kind="count", params={"query": query}
        )

    async def describe_workflow(self, workflow_id: str, run_id: str = "") -> dict[str, Any]:
        params = {"execution.runId": run_id} if run_id else None
        return await self.request(
            "GET", f"{self.ns_path}/workflows/{_path(workflow_id)}", kind="describe", params=params
        )

    async def history(
        self,
        workflow_id: str,
        *,
        reverse: bool = False,
        page_size: int = 100,
        next_page_token: str | None = None,
        wait_new_event: bool = False,
        run_id: str = "",
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"maximumPageSize": page_size}
        if next_page_token:
            params["nextPageToken"] = next_page_token
        if wait_new_event:
            params["waitNewEvent"] = "true"
        if run_id:
            params["execution.runId"] = run_id
        suffix = "history-reverse" if reverse else "history"
        return await self.request(
            "GET",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/{suffix}",
            kind="history_poll" if wait_new_event else "history",
            params=params,
            timeout_s=timeout_s,
        )

    async def query_workflow(
        self, workflow_id: str, query_type: str, *, timeout_s: float = 5.0
    ) -> list[Any]:
        """Run a workflow query; its result payloads (decoded by the caller)."""
        try:
            data = await self.request(
                "POST",
                f"{self.ns_path}/workflows/{_path(workflow_id)}/query/{_path(query_type)}",
                kind="query",
                body={},
                timeout_s=timeout_s,
            )
        except Unreachable as exc:
            if "did not answer" in exc.message:  # the server is up; no worker answered
                raise QueryFailed(exc.message) from exc
            raise
        except InvalidInput as exc:
            raise QueryFailed(exc.message) from exc
        if data.get("queryRejected"):
            raise QueryFailed(f"query rejected: {data['queryRejected']}")
        result = data.get("queryResult")
        return result if isinstance(result, list) else []

    async def workers(self, query: str = "") -> dict[str, Any]:
        params = {"query": query} if query else None
        return await self.request("GET", f"{self.ns_path}/workers", kind="workers", params=params)

    async def describe_task_queue(
        self, task_queue: str, *, kind: str = "TASK_QUEUE_TYPE_WORKFLOW"
    ) -> dict[str, Any]:
        """Pollers of one task queue (``pollers`` absent when nobody polls it)."""
        return await self.request(
            "GET",
            f"{self.ns_path}/task-queues/{_path(task_queue)}",
            kind="task_queue",
            params={"taskQueueType": kind},
        )

    # ----------------------------------------------------------------- writes

    async def reset_workflow(
        self,
        workflow_id: str,
        *,
        run_id: str,
        event_id: int,
        reason: str,
        request_id: str,
        identity: str,
    ) -> dict[str, Any]:
        """Reset run ``run_id`` to the workflow task completed at ``event_id``: a new run of
        the same workflow id replays the history before it; signals after it are applied
        again. Returns ``{"runId": NEW}``."""
        return await self.request(
            "POST",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/reset",
            kind="reset",
            body={
                "workflowExecution": {"workflowId": workflow_id, "runId": run_id},
                "reason": reason,
                "workflowTaskFinishEventId": str(event_id),
                "requestId": request_id,
                "resetReapplyType": "RESET_REAPPLY_TYPE_SIGNAL",
                "identity": identity,
            },
        )

    async def update_workflow(
        self,
        workflow_id: str,
        name: str,
        *,
        update_id: str,
        args: list[Any] | dict[str, Any],
        identity: str,
    ) -> dict[str, Any]:
        """Send an update and wait (up to the server's 20 s) for its outcome (``args``: a
        shorthand list or a full-form Payloads message)."""
        body = {
            "request": {
                "meta": {"updateId": update_id, "identity": identity},
                "input": {"args": args},
            },
            "waitPolicy": {"lifecycleStage": UPDATE_STAGE_COMPLETED},
        }
        return await self.request(
            "POST",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/update/{_path(name)}",
            kind="update",
            body=body,
            timeout_s=SERVER_UPDATE_WAIT_S + 5.0,
        )

    async def signal_workflow(
        self,
        workflow_id: str,
        name: str,
        *,
        args: list[Any] | dict[str, Any],
        identity: str,
        request_id: str,
    ) -> dict[str, Any]:
        """Send a signal (``args``: a shorthand list or a full-form Payloads message); the
        server keeps one SIGNALED event per ``request_id`` (a re-send with the same id
        answers 200 and writes nothing)."""
        return await self.request(
            "POST",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/signal/{_path(name)}",
            kind="signal",
            body={"input": args, "identity": identity, "requestId": request_id},
        )

    async def activity_command(
        self, workflow_id: str, activity_id: str, command: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """``pause`` / ``unpause`` / ``reset`` / ``update-options`` on one activity."""
        return await self.request(
            "POST",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/activities/{_path(activity_id)}"
            f"/{command}",
            kind=f"activity_{command}",
            body=body,
        )

    async def cancel_workflow(
        self, workflow_id: str, *, reason: str, identity: str, request_id: str
    ) -> dict[str, Any]:
        return await self.request(
            "POST",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/cancel",
            kind="cancel",
            body={"reason": reason, "identity": identity, "requestId": request_id},
        )

    async def terminate_workflow(
        self, workflow_id: str, *, reason: str, identity: str, details: list[Any] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"reason": reason, "identity": identity}
        if details:
            body["details"] = details
        return await self.request(
            "POST",
            f"{self.ns_path}/workflows/{_path(workflow_id)}/terminate",
            kind="terminate",
            body=body,
        )
