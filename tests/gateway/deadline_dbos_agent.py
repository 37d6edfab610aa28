"""A DBOS agent whose interrupts carry their own deadlines (``deadline=`` on the helper), for
the deadline test: run as a script, stopped by its pid.

- ``wf-soon``: asks "Refund order 7?" with ``deadline=timedelta(seconds=1)``;
- ``wf-later``: asks "Refund order 8?" with ``deadline=3600`` (seconds).

Usage: python deadline_dbos_agent.py --db PATH  (IRQ_AGENT_URL / IRQ_AGENT_TOKEN: the gateway)
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from datetime import timedelta
from pathlib import Path

from dbos import DBOS, SetWorkflowID

from backend_adapters.dbos.agent import AgentRun, agent_config, configure_agent


@DBOS.workflow()
def refund(order: int, deadline_s: float) -> str:
    with AgentRun(name="refund", interval_s=0.5, timeout_s=5, decision_poll_s=0.3) as run:
        deadline = timedelta(seconds=deadline_s) if deadline_s < 60 else deadline_s
        reply = run.interrupt(f"Refund order {order}?", action="refund", args={"order": order},
                              allowed=("approve", "reject"), deadline=deadline)
        return "refunded" if reply.approved else "kept"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    args = parser.parse_args()
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-deadline-test", url, app_version="irq-deadline-test-1"))
    configure_agent(url)
    DBOS.launch()
    for wid, order, deadline_s in (("wf-soon", 7, 1.0), ("wf-later", 8, 3600.0)):
        with SetWorkflowID(wid):
            DBOS.start_workflow(refund, order, deadline_s)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # the workflow threads are still parked in DBOS: do not wait for them


if __name__ == "__main__":
    main()
