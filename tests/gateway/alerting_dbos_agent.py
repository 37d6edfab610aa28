"""A DBOS agent for the alert tests, instrumented with the DBOS helpers as a user would
(heartbeats with progress, one interrupt): run as a script, stopped by its pid.

- ``wf-stuck``: beats every 0.3 s, its progress stays at 0.4 (a call that hangs but lives);
- ``wf-slow``: beats as often, its progress creeps up a little every half second;
- ``wf-ask``: asks "Refund order 42?" with no deadline of its own and waits for the answer.

Usage: python alerting_dbos_agent.py --db PATH  (IRQ_AGENT_URL / IRQ_AGENT_TOKEN: the gateway)
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from pathlib import Path

from dbos import DBOS, SetWorkflowID

from backend_adapters.dbos.agent import AgentRun, agent_config, configure_agent


@DBOS.workflow()
def stuck() -> str:
    with AgentRun(name="stuck", interval_s=0.3, timeout_s=5) as run:
        run.set_progress(0.4)
        while True:  # the call it makes never returns; the process is alive
            time.sleep(0.5)


@DBOS.workflow()
def slow() -> str:
    with AgentRun(name="slow", interval_s=0.3, timeout_s=5) as run:
        progress = 0.1
        while True:
            progress = min(0.99, progress + 0.001)
            run.set_progress(progress)
            time.sleep(0.5)


@DBOS.workflow()
def ask() -> str:
    with AgentRun(name="ask", interval_s=0.3, timeout_s=5, decision_poll_s=0.3) as run:
        reply = run.interrupt("Refund order 42?", action="refund", args={"order": 42},
                              allowed=("approve", "reject"))
        return "refunded" if reply.approved else "kept"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    args = parser.parse_args()
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-alert-test", url, app_version="irq-alert-test-1"))
    configure_agent(url)
    DBOS.launch()
    for wid, fn in (("wf-stuck", stuck), ("wf-slow", slow), ("wf-ask", ask)):
        with SetWorkflowID(wid):
            DBOS.start_workflow(fn)
    print("ready", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # the workflow threads are still parked in DBOS: do not wait for them


if __name__ == "__main__":
    main()
