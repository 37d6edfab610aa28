"""Paged visibility lists (``ListWorkflowExecutions``), each page charged to the request budget.

Shared by the listing of running / closed workflows and by interrupt discovery (the list of
runs carrying irq's search attribute).
"""

from __future__ import annotations

from typing import Any

from backend_adapters.base import Unreachable
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.observed_workflows import workflow_id
from backend_adapters.temporal.request_budget import TokenBucket

RUNNING_QUERY = "ExecutionStatus = 'Running'"


class Visibility:
    """Visibility queries of one namespace, narrowed by the URL's ``query=`` filter."""

    def __init__(
        self, connection: TemporalConnection, config: TemporalConfig, bucket: TokenBucket
    ) -> None:
        self._connection = connection
        self._config = config
        self._bucket = bucket
        self.last_truncated = False  # the last list stopped at its limit

    def query(self, base: str) -> str:
        extra = self._config.visibility_filter
        return f"{base} AND ({extra})" if extra else base

    async def list(self, query: str, *, limit: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token: str | None = None
        self.last_truncated = False
        while True:
            self._bucket.charge()
            page = await self._connection.http.list_workflows(
                query, page_size=min(self._config.page_size, limit), next_page_token=token
            )
            executions = page.get("executions") or []
            if not isinstance(executions, list):
                raise Unreachable(
                    f"temporal list: 'executions' is not a list at {self._config.display_url}"
                )
            out.extend(e for e in executions if isinstance(e, dict) and workflow_id(e))
            token = page.get("nextPageToken") or None
            if not token:
                return out
            if len(out) >= limit:
                self.last_truncated = True
                return out[:limit]
