"""A DBOS agent written without irq's helpers: no irq declaration, no heartbeats, and no
``application_version`` (DBOS derives one from the workflow source).

``python tests/adapters/plain_dbos_agent.py SQLITE_PATH WORKFLOW_ID`` starts one workflow
whose single step sleeps for ten minutes, prints ``ready`` and runs until killed.
"""

from __future__ import annotations

import sys
import threading
import time

from dbos import DBOS, SetWorkflowID


@DBOS.step()
def long_step() -> None:
    time.sleep(600)


@DBOS.workflow()
def plain_workflow() -> None:
    long_step()


def main(db_path: str, workflow_id: str) -> None:
    DBOS(config={"name": "plain-agent", "system_database_url": f"sqlite:///{db_path}"})
    DBOS.launch()
    with SetWorkflowID(workflow_id):
        DBOS.start_workflow(plain_workflow)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
