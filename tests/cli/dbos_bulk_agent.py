"""A real DBOS agent with many runs, for the bulk-by-filter and --wait tests (run as a
script, stopped by its pid).

Starts ``--gpu`` workflows ``wf-<prefix>-gpu-<i>`` holding a GPU slice (kept on pause) and a
lock (released on pause), and ``--cpu`` workflows ``wf-<prefix>-cpu-<i>`` holding a CPU
lease; every one then works through short journaled steps so it can be paused and resumed.
``--ask`` makes each GPU workflow first raise a "deploy" interrupt. Resource events go to
``--events`` (one JSON line each) so a test sees what the agent really did.

Usage: python dbos_bulk_agent.py --db PATH --events PATH --prefix east --gpu 20 --cpu 6
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

EVENTS: Path | None = None
_write = threading.Lock()


def record(kind: str, **data: Any) -> None:
    if EVENTS is not None:
        with _write, EVENTS.open("a") as out:
            out.write(json.dumps({"event": kind, "at": time.time(), **data}) + "\n")


def work(run_id: str, index: int) -> int:
    record("step", run=run_id, index=index)
    time.sleep(0.3)
    return index


def _resource(run_id: str, rid: str, kind: str, on_pause: str) -> AgentResource:
    return AgentResource(
        rid,
        kind=kind,
        on_pause=on_pause,  # type: ignore[arg-type]
        acquire=lambda: record("acquire", run=run_id, id=rid),
        release=lambda: record("release", run=run_id, id=rid),
    )


@DBOS.workflow()
def worker(run_id: str, gpu: bool, ask: bool) -> str:
    if gpu:
        resources = [
            _resource(run_id, "gpu-0", "gpu", "keep"),
            _resource(run_id, "db-lock", "lock", "release"),
        ]
    else:
        resources = [_resource(run_id, "cpu-0", "cpu", "release")]
    with AgentRun(
        name="trainer" if gpu else "indexer",
        resources=resources,
        interval_s=0.5,
        timeout_s=8,
        decision_poll_s=0.3,
    ) as run:
        if ask:
            reply = run.interrupt(
                "Deploy the model?", action="deploy", args={"env": "prod"},
                allowed=("approve", "reject"),
            )
            record("decision", run=run_id, approved=reply.approved)
        for index in range(2000):
            run.step(f"work-{index}", work, run_id, index)
    return "done"


def main() -> None:
    global EVENTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--gpu", type=int, default=1)
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument("--ask", action="store_true")
    args = parser.parse_args()
    EVENTS = Path(args.events)
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config(f"irq-bulk-{args.prefix}", url, app_version="irq-bulk-test-1"))
    configure_agent(url, context=args.prefix)
    DBOS.launch()
    for kind, count in (("gpu", args.gpu), ("cpu", args.cpu)):
        for index in range(count):
            wf = f"wf-{args.prefix}-{kind}-{index:02d}"
            with SetWorkflowID(wf):
                DBOS.start_workflow(worker, wf, kind == "gpu", args.ask and kind == "gpu")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # the workflow threads are still parked in DBOS: do not wait for them


if __name__ == "__main__":
    main()
