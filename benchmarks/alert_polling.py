"""What the backend-side alert facts cost each poll, against real servers (benchmarks/alerts.py
runs it after its gateway phase; ``python benchmarks/alert_polling.py`` runs it alone).

- Temporal (``temporal server start-dev``, devtools' DevServer): N running workflows, each on
  its own task queue that no worker polls. The adapter's ``observe()`` is polled as the gateway
  polls it; per poll: the task-queue describe calls it made (each queue is described at most
  every ``cache_s``, at most 8 per poll: task_queue_pollers.py) and their latency, the poll's
  time, and how long until every queue's ``no_workers`` condition was reported.
- Restate (``restate-server``): what one deployment probe is made of (deployment_health.py):
  the admin query ``SELECT id, endpoint, ty FROM sys_deployment`` and the ``/discover`` GET of
  a deployment, to one that answers (a local HTTP server) and to one that refuses.
- DBOS (SQLite system database created by a DBOS process): ``--enqueued`` workflows enqueued
  with ``DBOSClient.enqueue`` on a queue nobody listens to; the adapter's ``observe()`` (the
  active-workflows query and QueueHealth over its rows) and QueueHealth alone.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from benchmarks.results_file import spread  # noqa: E402

#: a DBOS application that registers no queue: it creates the system database and exits
DBOS_APP = """
import sys
from dbos import DBOS
DBOS(config={"name": "bench-front", "system_database_url": sys.argv[1]})
DBOS.launch()
DBOS.destroy()
"""


def _timed_poll(polls: list[float]) -> Any:
    """Wrap an async method: each call's wall time goes to ``polls``."""
    def wrap(fn: Any) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                polls.append(time.perf_counter() - start)
        return call
    return wrap


async def temporal_queues(queue_counts: list[int], workdir: Path) -> dict[str, Any]:
    from backend_adapters.temporal.adapter import TemporalBackend
    from backend_adapters.temporal.dev_server import DevServer

    server = DevServer(workdir / "temporal")
    server.start()
    out: dict[str, Any] = {}
    try:
        for n in queue_counts:
            tag = uuid.uuid4().hex[:6]
            for k in range(n):
                server.start_workflow(f"nw-{tag}-{k}", "TrainAgent", f"nobody-{tag}-{k}", {})
            backend = open_backend(server.backend_url(poll=1), MemoryPauseLedger())
            assert isinstance(backend, TemporalBackend)
            await backend.start()
            http = backend._connection.http  # the one place the benchmark reaches in
            describes: list[float] = []
            http.describe_task_queue = _timed_poll(describes)(http.describe_task_queue)  # type: ignore[method-assign]
            per_poll, poll_s = [], []
            start = time.monotonic()
            all_at = None
            mine = f"nobody-{tag}-"
            for _ in range(40):
                before = len(describes)
                t = time.perf_counter()
                obs = await backend.observe()
                poll_s.append(time.perf_counter() - t)
                per_poll.append(len(describes) - before)
                found = {c.subject for c in obs.conditions if mine in c.subject}
                if all_at is None and len(found) >= n:
                    all_at = time.monotonic() - start
                if all_at is not None and len(per_poll) >= 12:
                    break
                await asyncio.sleep(max(0.0, backend.poll_interval_s - poll_s[-1]))
            await backend.close()
            out[str(n)] = {
                "queues": n, "polls": len(per_poll), "poll_interval_s": 1.0,
                "describes_per_poll_max": max(per_poll),
                "describes_per_poll_mean": round(sum(per_poll) / len(per_poll), 2),
                "describe_ms": spread(describes), "observe_ms": spread(poll_s),
                "all_reported_s": None if all_at is None else round(all_at, 2)}
    finally:
        server.stop()
    return out


async def restate_probe(workdir: Path, rounds: int = 30) -> dict[str, Any]:
    from backend_adapters.restate.deployment_health import DeploymentHealth
    from backend_adapters.restate.dev_server import RestateServer
    from backend_adapters.restate.http_api import RestateHttp
    from console.processes import free_port

    async def discover(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = RestateServer(workdir / "restate")
    server.start()
    live_port, dead_port = free_port(), free_port()
    live = await asyncio.start_server(discover, "127.0.0.1", live_port)
    http = RestateHttp(server.admin_url, server.ingress_url)
    try:
        query: list[float] = []
        for _ in range(rounds):
            t = time.perf_counter()
            await http.query("SELECT id, endpoint, ty FROM sys_deployment")
            query.append(time.perf_counter() - t)
        health = DeploymentHealth(http, context="bench", cache_s=0.0)
        probes: dict[str, list[float]] = {"answers": [], "refuses": []}
        for _ in range(rounds):
            for label, port in (("answers", live_port), ("refuses", dead_port)):
                t = time.perf_counter()
                probe = await health._probe(f"http://127.0.0.1:{port}")
                probes[label].append(time.perf_counter() - t)
                assert probe.answers == (label == "answers"), probe
        return {"sys_deployment_query_ms": spread(query),
                "discover_probe_ms": {k: spread(v) for k, v in probes.items()},
                "probe_timeout_s": 1.0, "cache_s": 5.0}
    finally:
        live.close()
        await http.close()
        server.stop()


async def dbos_queue(enqueued: int, workdir: Path, polls: int = 20) -> dict[str, Any]:
    from dbos import DBOSClient

    from backend_adapters.dbos.queue_health import QueueHealth

    db = workdir / "dbos-sys.db"
    url = f"sqlite:///{db}"
    subprocess.run([sys.executable, "-c", DBOS_APP, url], check=True, capture_output=True,
                   timeout=120)
    client = DBOSClient(system_database_url=url)
    for i in range(enqueued):
        client.enqueue({"queue_name": "reports", "workflow_name": "make_report"}, i)
    backend = open_backend(f"dbos+sqlite:///{db}?no_workers_s=0", MemoryPauseLedger())
    await backend.start()
    observe: list[float] = []
    found = 0
    try:
        for _ in range(polls):
            t = time.perf_counter()
            obs = await backend.observe()
            observe.append(time.perf_counter() - t)
            found = max(found, sum(1 for c in obs.conditions if c.kind == "no_workers"))
        statuses = client.list_workflows(status="ENQUEUED")
        health = QueueHealth("bench", threshold_s=0.0)
        alone: list[float] = []
        for _ in range(polls):
            t = time.perf_counter()
            health.conditions(statuses)
            alone.append(time.perf_counter() - t)
    finally:
        await backend.close()
    return {"enqueued": enqueued, "observe_ms": spread(observe),
            "queue_health_ms": spread(alone), "no_workers_reported": found,
            "rows_read": len(statuses)}


def polling_phase(queue_counts: list[int], enqueued: int) -> dict[str, Any]:
    async def all_of() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="irq-bench-alert-polls-") as tmp:
            work = Path(tmp)
            return {"temporal": await temporal_queues(queue_counts, work),
                    "restate": await restate_probe(work),
                    "dbos": await dbos_queue(enqueued, work)}
    return asyncio.run(all_of())


def print_polling(res: dict[str, Any]) -> None:
    print("polling cost of the backend-side alert facts (real servers)")
    for n, t in res["temporal"].items():
        print(f"  Temporal, {n:>3} unpolled queues: describe calls per poll max "
              f"{t['describes_per_poll_max']} (mean {t['describes_per_poll_mean']}), describe "
              f"p50 {t['describe_ms'].get('median')} ms p95 {t['describe_ms'].get('p95')} ms, "
              f"observe() p50 {t['observe_ms']['median']} ms, all reported after "
              f"{t['all_reported_s']} s")
    r = res["restate"]
    print(f"  Restate: sys_deployment query p50 {r['sys_deployment_query_ms']['median']} ms; "
          f"/discover probe p50 {r['discover_probe_ms']['answers']['median']} ms (answers), "
          f"{r['discover_probe_ms']['refuses']['median']} ms (refuses)")
    d = res["dbos"]
    print(f"  DBOS, {d['enqueued']} enqueued: observe() p50 {d['observe_ms']['median']} ms "
          f"p95 {d['observe_ms']['p95']} ms; QueueHealth over {d['rows_read']} rows p50 "
          f"{d['queue_health_ms']['median']} ms; no_workers reported: "
          f"{d['no_workers_reported']}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--queues", default="1,10,50")
    ap.add_argument("--enqueued", type=int, default=1000)
    a = ap.parse_args()
    print_polling(polling_phase([int(q) for q in a.queues.split(",")], a.enqueued))
