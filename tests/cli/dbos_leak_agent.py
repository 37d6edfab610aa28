"""A real DBOS agent for the leak and forced-release tests (run as a script, stopped by its pid).

One workflow, ``trainer-1``: takes a GPU, a licence seat and a scratch disk, all marked
``on_cancel="keep"`` (the team frees them by hand between runs), trains in one journaled
step and completes: the run has ended and still reports all three held. The process stays
up with a release callback registered for GPUs (``on_release("gpu", ...)``); what it frees
goes to ``--events`` (one JSON line each).

Usage: python dbos_leak_agent.py --db PATH --events PATH --go PATH
(the workflow starts once ``--go`` exists; IRQ_AGENT_URL / IRQ_AGENT_TOKEN: where the
heartbeats go)
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
from backend_adapters.release_callbacks import ReleaseRequest, on_release

WORKFLOW_ID = "trainer-1"
EVENTS: Path | None = None


def record(kind: str, **data: Any) -> None:
    if EVENTS is not None:
        with EVENTS.open("a") as out:
            out.write(json.dumps({"event": kind, "at": time.time(), **data}) + "\n")


@on_release("gpu")
def free_gpu(request: ReleaseRequest) -> None:
    record("forced_release", run=request.native_id, resource=request.resource,
           reason=request.reason)


@DBOS.workflow()
def trainer() -> str:
    resources = [
        AgentResource("gpu-7", kind="gpu", on_cancel="keep"),
        AgentResource("lic-1", kind="license", on_cancel="keep"),
        AgentResource("scratch-1", kind="disk", on_cancel="keep"),
    ]
    with AgentRun(name="trainer", resources=resources, interval_s=0.5, timeout_s=5) as run:
        run.step("train", lambda: "model-v1")
    return "trained"


def main() -> None:
    global EVENTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--go", required=True)
    args = parser.parse_args()
    EVENTS = Path(args.events)
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-leak-test", url, app_version="irq-leak-test-1"))
    configure_agent(url)
    DBOS.launch()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not Path(args.go).exists() and not stop.wait(0.1):
        pass
    with SetWorkflowID(WORKFLOW_ID):
        DBOS.start_workflow(trainer)
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)


if __name__ == "__main__":
    main()
