"""A DBOS worker as DBOS's queue examples write one: a workflow of two steps that callers
enqueue on the queue ``reports`` (``DBOSClient.enqueue``), served by whichever process
registers that queue. It imports nothing from irq.

``python tests/adapters/plain_queue_worker.py SQLITE_PATH [QUEUE ...]`` launches DBOS,
listens on the queues named (none: a process that only serves its API and enqueues, like a
web front end), prints ``ready`` and runs until killed.
"""

from __future__ import annotations

import sys
import threading

from dbos import DBOS


@DBOS.step()
def gather(name: str) -> list[int]:
    return [len(name), 42]


@DBOS.step()
def render(name: str, figures: list[int]) -> str:
    return f"{name}: {sum(figures)}"


@DBOS.workflow()
def make_report(name: str) -> str:
    return render(name, gather(name))


def main(db_path: str, queues: list[str]) -> None:
    DBOS(
        config={
            "name": "reports",
            "system_database_url": f"sqlite:///{db_path}",
            "application_version": "reports-1",
        }
    )
    DBOS.launch()
    for queue in queues:
        DBOS.register_queue(queue, polling_interval_sec=0.1)  # after launch (DBOS 3.4)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
