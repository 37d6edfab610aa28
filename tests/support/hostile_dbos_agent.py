"""A real DBOS agent whose every free-text field carries terminal escape sequences (run as a
script, stopped by its pid): the workflow id, the run name, resource ids and kinds, a journal
step name, the heartbeat details and the interrupt's title, description, action and
arguments all hold :data:`PAYLOAD`. The workflow completes one step, then waits on its
interrupt (heartbeating) until it is stopped.

Usage: python hostile_dbos_agent.py --db PATH
(IRQ_AGENT_URL / IRQ_AGENT_TOKEN: where the heartbeats go)
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path

#: OSC 0 (window title), OSC 52 (clipboard write), CSI 2J (clear screen), the C1 controls
#: CSI (U+009B) and OSC (U+009D) ... ST (U+009C), a bidi override (U+202E), and a closing
#: markup tag that opens nothing (Rich and Textual markup raise on it; it comes before the
#: ``[2J``, after which their parsers would read the rest as plain text)
PAYLOAD = (
    "A\x1b]0;PWNED-TITLE\x07B[/x]\x1b]52;c;cHduZWQ=\x07C\x1b[2JD\x9b2JE\x9d0;C1-TITLE\x9cF\u202eG"
)
WORKFLOW_ID = "wf-hostile-" + PAYLOAD
RUN_ID = "dbos:local/" + WORKFLOW_ID


def main() -> None:
    from dbos import DBOS, SetWorkflowID

    from backend_adapters.dbos.agent import (
        AgentResource,
        AgentRun,
        agent_config,
        configure_agent,
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    args = parser.parse_args()

    @DBOS.workflow()
    def hostile() -> str:
        gpu = AgentResource("gpu-" + PAYLOAD, kind="gpu" + PAYLOAD, on_pause="keep")
        lock = AgentResource("lock-" + PAYLOAD, kind="lock" + PAYLOAD, on_pause="release")
        with AgentRun(
            name="name-" + PAYLOAD,
            resources=[gpu, lock],
            interval_s=0.5,
            timeout_s=30,
            decision_poll_s=0.3,
        ) as run:
            run.set_progress(0.5, note="detail-" + PAYLOAD)
            run.step("step-" + PAYLOAD, lambda: "done")
            run.interrupt(
                "title-" + PAYLOAD,
                description="description-" + PAYLOAD + "\nsecond line",
                action="action-" + PAYLOAD,
                args={"key-" + PAYLOAD: "value-" + PAYLOAD},
                allowed=("approve", "reject"),
            )
        return "done"

    url = f"sqlite:///{Path(args.db).resolve()}"
    DBOS(config=agent_config("irq-hostile-test", url, app_version="irq-hostile-test-1"))
    configure_agent(url)
    DBOS.launch()
    with SetWorkflowID(WORKFLOW_ID):
        DBOS.start_workflow(hostile)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # the workflow thread is still parked in DBOS: do not wait for it


if __name__ == "__main__":
    main()
