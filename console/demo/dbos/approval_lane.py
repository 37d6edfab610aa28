"""The fleet's lane of purchase approvals (console/demo/dbos/purchase_approval.py): one is
always waiting in its ``DBOS.recv`` or about to, so ``irq demo`` shows a wait irq found in
DBOS's own tables (kind ``message``) beside the ones its helpers raise.

The fleet supervisor calls :meth:`ApprovalLane.tend` every few seconds: when the latest
approval has ended (answered, timed out, cancelled) and a short rest has passed, it enqueues
the next generation (``purchase-approval-0002``, ...) on the demo's queue with a DBOSClient.
"""

from __future__ import annotations

import random
import time
from typing import Any

from backend_adapters.dbos.conventions import ACTIVE_STATUSES
from backend_adapters.dbos.mapping import paused_by_irq

#: workflow ids: ``purchase-approval-0001``, ...
PREFIX = "purchase-approval-"
#: as DBOS registers ``purchase_approval.purchase_approval`` (its qualified name)
WORKFLOW = "purchase_approval"
#: what the agents ask to buy, in turn
REQUESTS = ("training cluster for ranking-v7", "eval capacity for the Q3 release",
            "fine-tuning burst for support-bot", "embedding refresh for search")
#: seconds between an approval ending and the next one starting
REST_S = (5.0, 12.0)


def _generation(workflow_id: str) -> int:
    suffix = workflow_id.removeprefix(PREFIX)
    return int(suffix) if suffix.isdigit() else 0


class ApprovalLane:
    """Keeps one purchase approval in the fleet's database (see the module docstring)."""

    def __init__(self, db_url: str, *, queue: str, app_version: str,
                 rest_s: tuple[float, float] = REST_S) -> None:
        self.db_url, self.queue, self.app_version = db_url, queue, app_version
        self.rest_s = rest_s
        self._client: Any = None
        self._ended_at: float | None = None  # monotonic: when the latest was first seen ended
        self._rest = random.uniform(*rest_s)

    def tend(self) -> str | None:
        """Enqueue the next approval when it is due (its workflow id); None otherwise."""
        if self._client is None:
            from dbos import DBOSClient

            self._client = DBOSClient(system_database_url=self.db_url)
        found = self._client.list_workflows(
            workflow_id_prefix=PREFIX, load_input=False, load_output=False)
        latest = max(found, key=lambda s: _generation(s.workflow_id), default=None)
        if latest is not None:
            # paused by irq (CANCELLED, irq.intent pause): it comes back, no new one meanwhile
            if latest.status in ACTIVE_STATUSES or paused_by_irq(latest, False):
                self._ended_at = None
                return None
            now = time.monotonic()
            if self._ended_at is None:
                self._ended_at = now
            if now - self._ended_at < self._rest:
                return None
        gen = _generation(latest.workflow_id) + 1 if latest else 1
        workflow_id = f"{PREFIX}{gen:04d}"
        self._client.enqueue(
            {"queue_name": self.queue, "workflow_name": WORKFLOW, "workflow_id": workflow_id,
             "app_version": self.app_version},
            REQUESTS[(gen - 1) % len(REQUESTS)])
        self._ended_at, self._rest = None, random.uniform(*self.rest_s)
        return workflow_id

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
            self._client = None

