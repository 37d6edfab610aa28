"""A DBOS worker written the way DBOS's own examples write one (no irq imports): a
three-step pipeline whose third step fails while a flag file exists, and a workflow that
stays in its step while a hold file exists. Every step execution appends its name to
``counts`` (side effects counted outside the engine).

``python tests/cli/dbos_retry_agent.py SQLITE_PATH DIR [N]`` starts ``pipeline-1`` ..
``pipeline-N`` (default 1) and ``busy-1``, prints ``ready`` and keeps executing (forks
included) until killed.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from dbos import DBOS, SetWorkflowID

WORK = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(".")


def record(step: str) -> None:
    with open(WORK / "counts", "a") as out:
        out.write(step + "\n")


@DBOS.step()
def fetch_data() -> str:
    record("fetch_data")
    return "rows"


@DBOS.step()
def transform(rows: str) -> str:
    record("transform")
    return rows.upper()


@DBOS.step()
def publish(table: str) -> str:
    record("publish")
    if (WORK / "fail").exists():
        raise RuntimeError("publish failed: the warehouse is read-only")
    return f"published {table}"


@DBOS.workflow()
def pipeline() -> str:
    rows = fetch_data()
    table = transform(rows)
    return publish(table)


@DBOS.step()
def hold() -> None:
    deadline = time.monotonic() + 600
    while (WORK / "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@DBOS.workflow()
def busy() -> None:
    hold()


def main(db_path: str, pipelines: int) -> None:
    DBOS(config={"name": "retry-agent", "system_database_url": f"sqlite:///{db_path}"})
    DBOS.launch()
    for n in range(1, pipelines + 1):
        with SetWorkflowID(f"pipeline-{n}"):
            DBOS.start_workflow(pipeline)
    with SetWorkflowID("busy-1"):
        DBOS.start_workflow(busy)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
