"""The DBOS side of benchmarks/bulk_retry.py: a worker written the way DBOS's own examples
write one (no irq imports). ``pipeline(name)`` runs three steps; the third, ``publish``,
fails while the file ``WORK/fail`` exists. Every step execution appends ``STEP NAME`` to
``WORK/counts`` (and a successful publish ``published NAME``): side effects counted outside
the engine, so a run retried twice shows up.

    python benchmarks/bulk_retry_dbos_agent.py SQLITE_PATH WORK N PREFIX

starts ``PREFIX-0000`` .. ``PREFIX-{N-1}``, prints ``ready`` and keeps executing (forks
included) until stopped.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from dbos import DBOS, SetWorkflowID

WORK = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(".")


def record(line: str) -> None:
    with open(WORK / "counts", "a") as out:  # one short O_APPEND write per line
        out.write(line + "\n")


@DBOS.step()
def fetch_data(name: str) -> str:
    record(f"fetch_data {name}")
    return "rows"


@DBOS.step()
def transform(name: str, rows: str) -> str:
    record(f"transform {name}")
    return rows.upper()


@DBOS.step()
def publish(name: str, table: str) -> str:
    record(f"publish {name}")
    if (WORK / "fail").exists():
        raise RuntimeError("publish failed: the warehouse is read-only")
    record(f"published {name}")
    return f"published {table}"


@DBOS.workflow()
def pipeline(name: str) -> str:
    rows = fetch_data(name)
    table = transform(name, rows)
    return publish(name, table)


def main(db_path: str, count: int, prefix: str) -> None:
    DBOS(config={"name": "bulk-retry-agent", "system_database_url": f"sqlite:///{db_path}"})
    DBOS.launch()
    for n in range(count):
        name = f"{prefix}-{n:04d}"
        with SetWorkflowID(name):
            DBOS.start_workflow(pipeline, name)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[3]), sys.argv[4])
