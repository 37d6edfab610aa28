"""``no_workers``: running workflows on a task queue that no worker polls.

A workflow whose task queue has no poller makes no progress and says nothing: no heartbeat
goes late because none ever started. Temporal's task-queue description lists the pollers it
saw (``pollers`` is absent — ``null`` — for a queue nobody polls, measured on 1.32); a
poller that died stays listed with an old ``lastAccessTime`` for a few minutes, so only
pollers seen within ``POLLER_FRESH_S`` count (a live idle worker re-polls at least every
~70 s: the server ends a long poll after about a minute).

One condition per queue (not per workflow): one missing worker is one thing to fix, whatever
the number of workflows waiting for it. Each queue is described at most every ``cache_s``
seconds, charged to the request budget, at most ``MAX_PER_POLL`` queues per poll (stalest
first), before the poll refreshes the runs' heartbeats (observer.py: that refresh would
spend every token of a fleet larger than the budget); the workflow task queue is checked
(``TASK_QUEUE_TYPE_WORKFLOW``), which is where a workflow with no worker waits first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend_adapters.base import BackendError, Unreachable
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.payloads import parse_time
from backend_adapters.temporal.request_budget import TokenBucket
from backend_adapters.temporal.state_mapping import BACKEND
from console.alert_model import AlertKind, Condition

POLLER_FRESH_S = 150.0
MAX_PER_POLL = 8
MIN_CACHE_S = 5.0
SAMPLE = 5


@dataclass
class QueueCheck:
    polled: bool
    checked_mono: float
    unpolled_since: datetime | None = None


def task_queue_of(info: dict[str, Any]) -> str:
    queue = info.get("taskQueue")
    return str(queue.get("name", "") if isinstance(queue, dict) else queue or "")


def has_live_poller(describe: dict[str, Any], now: datetime) -> bool:
    pollers = describe.get("pollers")
    if not isinstance(pollers, list):
        return False
    for poller in pollers:
        if not isinstance(poller, dict):
            continue
        seen = parse_time(poller.get("lastAccessTime"))
        if seen is None or (now - seen).total_seconds() <= POLLER_FRESH_S:
            return True
    return False


class TaskQueuePollers:
    """Whether the task queues of running workflows have a live poller, cached per queue."""

    def __init__(
        self, connection: TemporalConnection, config: TemporalConfig, bucket: TokenBucket
    ) -> None:
        self._connection = connection
        self._config = config
        self._bucket = bucket
        self.cache_s = max(MIN_CACHE_S, config.poll_interval_s)
        self._checks: dict[str, QueueCheck] = {}

    async def conditions(self, listed: dict[str, dict[str, Any]], now: datetime) -> list[Condition]:
        """A ``no_workers`` condition per task queue of ``listed`` (running workflows) that
        no worker polls."""
        by_queue: dict[str, list[str]] = {}
        for wid, info in listed.items():
            queue = task_queue_of(info)
            if queue and info.get("status", "WORKFLOW_EXECUTION_STATUS_RUNNING") == (
                "WORKFLOW_EXECUTION_STATUS_RUNNING"
            ):
                by_queue.setdefault(queue, []).append(wid)
        for queue in set(self._checks) - set(by_queue):
            del self._checks[queue]
        await self._refresh(sorted(by_queue, key=self._checked_mono), now)
        out: list[Condition] = []
        for queue, wids in sorted(by_queue.items()):
            check = self._checks.get(queue)
            if check is None or check.polled:
                continue
            out.append(self._condition(queue, sorted(wids), check))
        return out

    def _checked_mono(self, queue: str) -> float:
        check = self._checks.get(queue)
        return check.checked_mono if check is not None else float("-inf")

    async def _refresh(self, queues: list[str], now: datetime) -> None:
        mono = time.monotonic()
        asked = 0
        for queue in queues:
            check = self._checks.get(queue)
            if check is not None and mono - check.checked_mono < self.cache_s:
                continue
            if asked >= MAX_PER_POLL or not self._bucket.try_take():
                return  # the rest on a later poll; the last answer stands until then
            asked += 1
            try:
                describe = await self._connection.http.describe_task_queue(queue)
            except Unreachable:
                raise
            except BackendError:
                continue  # not a queue the server describes: say nothing rather than guess
            polled = has_live_poller(describe, now)
            since = None
            if not polled:
                since = check.unpolled_since if check is not None and not check.polled else now
            self._checks[queue] = QueueCheck(polled, mono, since)

    def _condition(self, queue: str, wids: list[str], check: QueueCheck) -> Condition:
        n = len(wids)
        context = self._config.context
        return Condition(
            kind=AlertKind.NO_WORKERS,
            subject=f"{BACKEND}:{context}/task-queue/{queue}",
            detail=f"{n} running workflow{'' if n == 1 else 's'} on task queue '{queue}' and "
            f"no worker polls it: nothing {'it waits' if n == 1 else 'they wait'} for can run",
            action=f"start a worker polling task queue {queue}",
            backend=BACKEND,
            context=context,
            since=check.unpolled_since,
            facts={"task_queue": queue, "workflows": n, "sample": wids[:SAMPLE]},
        )
