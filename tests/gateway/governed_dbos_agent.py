"""A real DBOS agent for the governance tests (run as a script, stopped by its pid).

``--spec FILE`` holds a JSON list of workflows to start, each
``{"id": WID, "resources": [{"id", "kind", "on_pause", "on_cancel"}], "interrupt": {title,
action, args, allowed, policy} | null, "steps": N}``: the workflow declares its resources,
raises the interrupt (with its ``policy`` in the payload) if any, records the decision it got,
then runs N short journaled steps. Every decision and step is a JSON line in ``--events``, so a
test reads what the agent really received.

Usage: python governed_dbos_agent.py --db PATH --events PATH --spec PATH
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


def record(wid: str, kind: str, **data: Any) -> None:
    if EVENTS is not None:
        with EVENTS.open("a") as out:
            out.write(json.dumps({"wid": wid, "event": kind, "at": time.time(), **data}) + "\n")


def work(wid: str, index: int) -> int:
    record(wid, "step", index=index)
    time.sleep(0.2)
    return index


@DBOS.workflow()
def governed(spec: dict[str, Any]) -> str:
    wid = spec["id"]
    resources = [AgentResource(r["id"], kind=r.get("kind", "resource"),
                               on_pause=r.get("on_pause", "keep"),
                               on_cancel=r.get("on_cancel", "release"))
                 for r in spec.get("resources", [])]
    with AgentRun(name=wid, resources=resources, interval_s=0.3, timeout_s=5,
                  decision_poll_s=0.2) as run:
        ask = spec.get("interrupt")
        if ask:
            reply = run.interrupt(ask["title"], action=ask["action"], args=ask.get("args", {}),
                                  allowed=tuple(ask.get("allowed", ("approve", "reject"))),
                                  policy=ask.get("policy"))
            record(wid, "decision", type=reply.type, args=reply.args, feedback=reply.feedback)
        for index in range(int(spec.get("steps", 1))):
            run.step(f"work-{index}", work, wid, index)
    return "done"


def main() -> None:
    global EVENTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--spec", required=True)
    args = parser.parse_args()
    EVENTS = Path(args.events)
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-governance-test", url, app_version="irq-governance-test-1"))
    configure_agent(url)
    DBOS.launch()
    for spec in json.loads(Path(args.spec).read_text()):
        with SetWorkflowID(spec["id"]):
            DBOS.start_workflow(governed, spec)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # workflow threads may still be parked in DBOS: do not wait for them


if __name__ == "__main__":
    main()
