"""Why each failed workflow failed: the newest page of its history, read once per run.

A closed run's history never changes, so one read per (workflow id, run id) is enough; the
reads are charged to the request budget and spread over polls (at most
``READS_PER_POLL``), the runs the operator looks at (``get_run``) read at once.
"""

from __future__ import annotations

from typing import Any

from backend_adapters.base import NotFound
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.request_budget import TokenBucket
from backend_adapters.temporal.run_failures import ClosedFacts, failure_from_history

FAILED_STATUSES = {
    "WORKFLOW_EXECUTION_STATUS_FAILED",
    "WORKFLOW_EXECUTION_STATUS_TIMED_OUT",
}
#: enough for the close event, the workflow task before it and the last activity's events
HISTORY_PAGE = 16
READS_PER_POLL = 8


class ClosedFailures:
    """The failure facts of failed workflows, by workflow id (for their newest run)."""

    def __init__(self, connection: TemporalConnection, bucket: TokenBucket) -> None:
        self._connection = connection
        self._bucket = bucket
        self._facts: dict[str, ClosedFacts] = {}

    def of(self, wid: str) -> ClosedFacts | None:
        return self._facts.get(wid)

    def forget(self, wid: str) -> None:
        self._facts.pop(wid, None)

    async def refresh(self, closed: dict[str, dict[str, Any]]) -> None:
        """Read the failures of failed runs not read yet, within the budget."""
        read = 0
        for wid, info in closed.items():
            if read >= READS_PER_POLL:
                return
            if not self._needs(wid, info):
                continue
            if not self._bucket.try_take():
                return  # the rest on a later poll
            read += 1
            await self.read(wid, info)

    async def read(self, wid: str, info: dict[str, Any]) -> ClosedFacts | None:
        """Read one run's failure now (no budget check: the operator asked for this run)."""
        if not self._needs(wid, info):
            return self._facts.get(wid)
        run_id = str((info.get("execution") or {}).get("runId") or "")
        try:
            page = await self._connection.http.history(
                wid, reverse=True, page_size=HISTORY_PAGE, run_id=run_id
            )
        except NotFound:
            return None
        events = (page.get("history") or {}).get("events") or []
        facts = failure_from_history(run_id, [e for e in events if isinstance(e, dict)])
        self._facts[wid] = facts
        return facts

    def _needs(self, wid: str, info: dict[str, Any]) -> bool:
        if info.get("status") not in FAILED_STATUSES:
            return False
        known = self._facts.get(wid)
        run_id = str((info.get("execution") or {}).get("runId") or "")
        return known is None or known.run_id != run_id
