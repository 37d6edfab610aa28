"""The demo's month-end close: a DBOS workflow written the way DBOS's own examples write one
(``@DBOS.workflow`` over ``@DBOS.step`` functions; no irq imports, no heartbeats), whose last
step fails the first time it runs: the reports API answers 503.

Three steps: ``fetch_invoices`` -> ``reconcile`` -> ``publish_report``. The first attempt to
publish a close leaves a marker in the close's ``outbox`` directory and fails; any later
attempt (``irq retry``: a DBOS fork that keeps the first two steps' recorded results) finds the
marker and writes the report into the outbox. So the demo shows a failed run with its error
and failing step, and a retry that completes it without fetching or reconciling again.

Registered by every demo worker (console/demo/dbos/worker.py imports this module before
``DBOS.launch()``); started by the fleet through the ``irq-demo`` queue
(console/demo/dbos/showcase.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from dbos import DBOS

#: the marker of a first publish attempt (the one the reports API turns away)
ATTEMPTED = "reports-api.attempted"


@DBOS.step(retries_allowed=True, max_attempts=3)
def fetch_invoices(period: str) -> list[dict[str, object]]:
    time.sleep(3)  # a paged export from the billing system
    return [
        {"invoice": f"INV-{period.replace('-', '')}-{n:04d}", "amount": 120 + 37 * n}
        for n in range(1, 41)
    ]


@DBOS.step()
def reconcile(invoices: list[dict[str, object]]) -> dict[str, object]:
    time.sleep(4)  # matching invoices against the bank statement
    total = sum(int(str(i["amount"])) for i in invoices)
    return {"invoices": len(invoices), "total_eur": total, "unmatched": 2}


# No DBOS retries here: a retried step would hide the outage from the operator; the run fails
# with the upstream's error and someone decides when to try again (irq retry).
@DBOS.step(retries_allowed=False)
def publish_report(period: str, summary: dict[str, object], outbox: str) -> str:
    time.sleep(2)
    folder = Path(outbox)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / ATTEMPTED
    if not marker.exists():
        marker.write_text(str(time.time()))
        raise ConnectionError(
            "upstream 503 from reports-api: Service Unavailable (POST /v2/reports)"
        )
    report = folder / f"month-end-{period}.json"
    report.write_text(json.dumps({"period": period, **summary}))
    return str(report)


@DBOS.workflow()
def month_end_close(period: str, outbox: str) -> str:
    invoices = fetch_invoices(period)
    summary = reconcile(invoices)
    return publish_report(period, summary, outbox)
