"""What ``irq demo`` shows beyond the lanes of console/demo/dbos/plans.py: a run to bring back
with ``irq retry``, and a stuck agent beside a slow one (the fleet's ``--showcase``).

- **A failed run.** The month-end close (console/demo/dbos/month_end.py, plain DBOS) fails in
  its third step with the reports API's 503. The fleet starts one when it starts, unless the
  last one is still waiting for somebody to retry it; ``irq retry`` (TUI: ``R``) forks it from
  ``publish_report``, keeping the invoices fetched and reconciled, and the fork completes.
- **Stuck, not silent.** ``erp-sync`` heartbeats as fresh as any agent's while its progress
  stays at 0.33: it waits for an ERP export that never finishes (the ``stalled`` alert's case).
- **Slow, not stuck.** ``backfill`` re-embeds a corpus for a quarter of an hour; its progress
  moves a little between two heartbeats, so it is never taken for stalled.

- **A wait written DBOS's way.** A purchase approval (console/demo/dbos/purchase_approval.py,
  plain DBOS) waits in ``DBOS.recv``; irq finds it in DBOS's tables (kind ``message``). The
  fleet keeps one waiting (console/demo/dbos/approval_lane.py).

The two agents run as lanes of one worker (``--showcase-lanes``), through the demo's agent
workflow like every other lane.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from backend_adapters.dbos.conventions import ACTIVE_STATUSES

#: workflow ids of the month-end closes: ``month-end-close-0001``, ...
CLOSE_PREFIX = "month-end-close-"
#: as DBOS registers ``month_end.month_end_close`` (its qualified name)
CLOSE_WORKFLOW = "month_end_close"


def erp_sync(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    """Beats, holds its ERP session, and gets nowhere: the export it waits for never ends."""
    return {
        "name": "erp-sync/vendor-master",
        "agent": "erp-sync-agent",
        "team": "finance",
        "resources": [
            {
                "id": f"erp-api-session/{lane}",
                "kind": "connection",
                "on_pause": "release",
                "detail": "SAP export API, 1 session per tenant",
            },
        ],
        "script": [
            {"step": "list changed vendors", "seconds": 3},
            {"step": "wait for ERP export", "seconds": 3600},
            {"step": "import vendors", "seconds": 4},
        ],
    }


def embeddings_backfill(lane: int, gen: int, rng: random.Random) -> dict[str, Any]:
    """Slow but moving: progress creeps through one long step."""
    return {
        "name": "backfill/support-embeddings",
        "agent": "backfill-agent",
        "team": "ml",
        "resources": [
            {
                "id": f"gpu-l4-3/slice-{lane % 4}",
                "kind": "gpu",
                "on_pause": "keep",
                "detail": "24 GB slice, batch inference",
            },
        ],
        "script": [
            {"step": "snapshot corpus", "seconds": 3},
            {"step": "re-embed 1.2M documents", "seconds": 900, "creep": True},
            {"step": "swap index", "seconds": 3},
        ],
    }


SHOWCASE_KINDS: list[tuple[str, Callable[[int, int, random.Random], dict[str, Any]]]] = [
    ("erp-sync", erp_sync),
    ("backfill", embeddings_backfill),
]


def _generation(workflow_id: str) -> int:
    suffix = workflow_id.removeprefix(CLOSE_PREFIX)
    return int(suffix) if suffix.isdigit() else 0


def _last_month(today: date) -> str:
    return (today.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")


def start_month_end_close(
    db_url: str, outboxes: Path, *, queue: str, app_version: str, wait_s: float = 30.0
) -> str | None:
    """Enqueue the next month-end close (its workflow id), or None when the last one is still
    running or failed without a retry yet (one failure waiting is enough to show).

    Waits up to ``wait_s`` for the workers to create the system database's schema (a client
    never migrates it)."""
    from dbos import DBOSClient

    deadline = time.monotonic() + wait_s
    while True:
        try:
            client = DBOSClient(system_database_url=db_url)
            try:
                return _enqueue_due_close(client, outboxes, queue, app_version)
            finally:
                client.destroy()
        except Exception:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


def _enqueue_due_close(client: Any, outboxes: Path, queue: str, app_version: str) -> str | None:
    closes = client.list_workflows(
        workflow_id_prefix=CLOSE_PREFIX, load_input=False, load_output=False
    )
    latest = max(closes, key=lambda s: _generation(s.workflow_id), default=None)
    if latest is not None:
        if latest.status in ACTIVE_STATUSES:
            return None
        retried = client.list_workflows(
            forked_from=latest.workflow_id, load_input=False, load_output=False
        )
        if latest.status == "ERROR" and not retried:
            return None
    workflow_id = f"{CLOSE_PREFIX}{_generation(latest.workflow_id) + 1 if latest else 1:04d}"
    client.enqueue(
        {
            "queue_name": queue,
            "workflow_name": CLOSE_WORKFLOW,
            "workflow_id": workflow_id,
            "app_version": app_version,
        },
        _last_month(date.today()),
        str(outboxes / workflow_id),  # a close's own outbox: its own first-attempt marker
    )
    return workflow_id
