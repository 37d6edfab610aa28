"""Worker liveness from ``GET /api/v1/namespaces/{ns}/workers``.

SDK workers report every 60 s. A worker killed with SIGKILL keeps ``WORKER_STATUS_RUNNING``
with a stale ``heartbeatTime`` until the server forgets it (minutes later), so liveness is
staleness: a worker is suspect once its last report is older than 60 s plus a margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend_adapters.temporal.payloads import parse_time

WORKER_REPORT_INTERVAL_S = 60.0


@dataclass(frozen=True)
class WorkerSeen:
    identity: str
    task_queue: str
    status: str
    heartbeat_at: datetime | None
    host: str = ""
    pid: str = ""

    def silent_s(self, now: datetime) -> float | None:
        if self.heartbeat_at is None:
            return None
        return max(0.0, (now - self.heartbeat_at).total_seconds())


def workers_from_json(data: dict[str, Any]) -> list[WorkerSeen]:
    out: list[WorkerSeen] = []
    for item in data.get("workersInfo") or []:
        hb = (item or {}).get("workerHeartbeat") or {}
        if not hb.get("workerIdentity"):
            continue
        host = hb.get("hostInfo") or {}
        out.append(
            WorkerSeen(
                identity=str(hb["workerIdentity"]),
                task_queue=str(hb.get("taskQueue") or ""),
                status=str(hb.get("status") or "").removeprefix("WORKER_STATUS_").lower(),
                heartbeat_at=parse_time(hb.get("heartbeatTime")),
                host=str(host.get("hostName") or ""),
                pid=str(host.get("processId") or ""),
            )
        )
    return out


def stale_workers(
    workers: list[WorkerSeen], now: datetime, *, margin_s: float = 30.0
) -> dict[str, float]:
    """identity -> seconds of silence, for workers silent past their report interval.

    A worker identity reported several times (restarts) counts by its freshest report.
    """
    freshest: dict[str, float] = {}
    for worker in workers:
        silent = worker.silent_s(now)
        if silent is None or worker.status not in ("running", ""):
            continue
        freshest[worker.identity] = min(silent, freshest.get(worker.identity, silent))
    limit = WORKER_REPORT_INTERVAL_S + margin_s
    return {identity: s for identity, s in freshest.items() if s > limit}
