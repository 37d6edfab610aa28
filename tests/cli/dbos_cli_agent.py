"""A real DBOS agent for the CLI end-to-end test (run as a script, stopped by its pid).

One workflow, ``wf-cli-1``: declares a lock (released on pause) and a GPU slice (kept on
pause), journals a ``plan`` step, raises a "deploy to prod" interrupt, then works through
short journaled steps so it can be paused and resumed. Resource events go to ``--events``
(one JSON line each) so the test sees what the agent really did.

Usage: python dbos_cli_agent.py --db PATH --events PATH
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

WORKFLOW_ID = "wf-cli-1"
DEPLOY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"env": {"type": "string", "enum": ["staging", "prod"]}},
    "required": ["env"],
}
EVENTS: Path | None = None


def record(kind: str, **data: Any) -> None:
    if EVENTS is not None:
        with EVENTS.open("a") as out:
            out.write(json.dumps({"event": kind, "at": time.time(), **data}) + "\n")


def work(index: int) -> int:
    record("step", index=index)
    time.sleep(0.3)
    return index


@DBOS.workflow()
def deployer() -> str:
    lock = AgentResource(
        "db-lock",
        kind="lock",
        on_pause="release",
        acquire=lambda: record("acquire", id="db-lock"),
        release=lambda: record("release", id="db-lock"),
    )
    gpu = AgentResource(
        "gpu-0",
        kind="gpu",
        on_pause="keep",
        detail="count=2 A100",
        acquire=lambda: record("acquire", id="gpu-0"),
        release=lambda: record("release", id="gpu-0"),
    )
    with AgentRun(
        name="deployer",
        resources=[lock, gpu],
        interval_s=0.5,
        timeout_s=5,
        decision_poll_s=0.3,
    ) as run:
        run.step("plan", lambda: "plan ready")
        reply = run.interrupt(
            "Deploy to prod?",
            action="deploy",
            args={"env": "prod"},
            args_schema=DEPLOY_SCHEMA,
            allowed=("approve", "edit", "reject"),
        )
        record("decision", approved=reply.approved)
        for index in range(400):
            run.step(f"work-{index}", work, index)
    return "done"


def main() -> None:
    global EVENTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--events", required=True)
    args = parser.parse_args()
    EVENTS = Path(args.events)
    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-cli-test", url, app_version="irq-cli-test-1"))
    configure_agent(url)
    DBOS.launch()
    with SetWorkflowID(WORKFLOW_ID):
        DBOS.start_workflow(deployer)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # the workflow thread is still parked in DBOS: do not wait for it


if __name__ == "__main__":
    main()
