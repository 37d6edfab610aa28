"""Failed runs a newer run of their workflow id replaced, kept out of the closed listing.

``failed_window`` lists failed, timed-out, terminated and canceled runs long after they
closed. A workflow id restarted or reset since may have a newer run that completed before
the closed window, which no list shows: the old failure is then not what the workflow id is
now (``describe`` without a run id, which ``get_run`` and ``retry`` act on, gives the newer
run). Each run known only from the failed window is checked once by a describe of its
workflow id, charged to the request budget and spread over polls; until then it is shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from backend_adapters.base import NotFound
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.observed_workflows import is_older_run
from backend_adapters.temporal.payloads import parse_time
from backend_adapters.temporal.request_budget import TokenBucket

READS_PER_POLL = 8


class SupersededRuns:
    """The newest run of each workflow id with an old closed run listed."""

    def __init__(self, connection: TemporalConnection, bucket: TokenBucket) -> None:
        self._connection = connection
        self._bucket = bucket
        #: workflow id -> (its newest run seen, when the old run it was checked for closed)
        self._newest: dict[str, tuple[dict[str, Any], datetime]] = {}

    async def drop(
        self, closed: dict[str, dict[str, Any]], window_start: datetime, attention_start: datetime
    ) -> None:
        """Remove from ``closed`` the runs closed before ``window_start`` that a newer run
        replaced; check at most READS_PER_POLL new workflow ids, within the budget."""
        reads = 0
        for wid, info in list(closed.items()):
            known = self._newest.get(wid)
            if known is not None and is_older_run(known[0], info):
                known = self._newest[wid] = (info, known[1])  # a newer run closed since
            closed_at = parse_time(info.get("closeTime"))
            if closed_at is None or closed_at >= window_start:
                continue  # a newer run closed since would be on the closed-window list too
            if known is None:
                if reads >= READS_PER_POLL or not self._bucket.try_take():
                    continue  # shown until checked on a later poll
                reads += 1
                newest = await self._current(wid)
                if newest is None:
                    del closed[wid]  # deleted: visibility lags behind
                    continue
                known = self._newest[wid] = (newest, closed_at)
            if is_older_run(info, known[0]):
                del closed[wid]
        # remembered while the failed window would list the old run again
        self._newest = {w: k for w, k in self._newest.items() if k[1] >= attention_start}

    async def _current(self, wid: str) -> dict[str, Any] | None:
        try:
            describe = await self._connection.http.describe_workflow(wid)
        except NotFound:
            return None
        return dict(describe.get("workflowExecutionInfo") or {})
