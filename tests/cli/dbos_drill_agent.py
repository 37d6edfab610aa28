"""A real DBOS agent for the drill tests (run under ``tests/support/restart_supervisor.py``).

One workflow, ``wf-drill-1``: holds a lock (released on pause) and a GPU slice (kept), journals
``plan`` and ``charge`` and then short ``work-N`` steps. Every start of the process, every
``charge`` it performs and every resource event goes to ``--record`` (JSON lines).

``--recharge`` makes it a broken agent: it keeps "already charged" in process memory, so after
a restart it charges again (a new journaled ``charge`` step once the recovered workflow runs
new code) -- the completed step re-runs, which a drill must report.

Usage: python dbos_drill_agent.py --db PATH --record PATH --context NAME [--recharge]
(IRQ_AGENT_URL / IRQ_AGENT_TOKEN: where the heartbeats go)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID

from backend_adapters.dbos.agent import AgentResource, AgentRun, agent_config, configure_agent

WORKFLOW_ID = "wf-drill-1"
RECORD: Path | None = None
RESTARTED = False  # this process is not the first one that ran the agent
RECHARGE = False
charge_due = threading.Event()  # the broken agent's in-memory idea that it has not charged
charged_here = False


def record(kind: str, **data: Any) -> None:
    if RECORD is not None:
        with RECORD.open("a") as out:
            out.write(json.dumps({"event": kind, "at": time.time(), "pid": os.getpid(), **data})
                      + "\n")


def charge() -> str:
    record("charge")
    return "charged"


def work(index: int) -> int:
    global charged_here
    if RECHARGE and RESTARTED and not charged_here:
        charged_here = True
        charge_due.set()  # new code runs in this process: it has "not charged yet"
    time.sleep(0.4)
    return index


@DBOS.workflow()
def drilled() -> str:
    lock = AgentResource("db-lock", kind="lock", on_pause="release",
                         acquire=lambda: record("acquire", id="db-lock"),
                         release=lambda: record("release", id="db-lock"))
    gpu = AgentResource("gpu-0", kind="gpu", on_pause="keep",
                        acquire=lambda: record("acquire", id="gpu-0"),
                        release=lambda: record("release", id="gpu-0"))
    with AgentRun(name="drilled", resources=[lock, gpu], interval_s=0.5, timeout_s=4) as run:
        run.step("plan", lambda: "plan ready")
        run.step("charge", charge)
        for index in range(1000):
            run.step(f"work-{index}", work, index)
            if charge_due.is_set():
                charge_due.clear()
                run.step("charge", charge)
    return "done"


def main() -> None:
    global RECORD, RESTARTED, RECHARGE
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--context", required=True)
    parser.add_argument("--recharge", action="store_true")
    args = parser.parse_args()
    RECORD = Path(args.record)
    RECHARGE = args.recharge
    RESTARTED = RECORD.exists() and '"start"' in RECORD.read_text()
    record("start")
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-drill-test", url, app_version="irq-drill-test-1"))
    configure_agent(url, context=args.context)
    DBOS.launch()  # recovers the pending workflow after a restart
    if DBOS.get_workflow_status(WORKFLOW_ID) is None:
        with SetWorkflowID(WORKFLOW_ID):
            DBOS.start_workflow(drilled)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)


if __name__ == "__main__":
    main()
