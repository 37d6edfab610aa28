"""A worker process for the sample agents (``temporal_sample_agents.py``), and
:class:`WorkerProcess`, which the Temporal tests and ``benchmarks/temporal_observe.py`` use to
run one as a child process.

    python -m devtools.temporal_sample_worker ADDRESS TASK_QUEUE [IDENTITY] [CADENCE_S]

Prints ``ready`` once polling; runs until stopped.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from console.processes import ChildProcess

REPO = Path(__file__).resolve().parents[1]


async def serve(address: str, task_queue: str, identity: str, cadence_s: float) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from backend_adapters.temporal.agent import worker_options
    from devtools.temporal_sample_agents import ACTIVITIES, WORKFLOWS

    client = await Client.connect(address, identity=identity)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        identity=identity,
        **worker_options(cadence_s=cadence_s),
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


@dataclass
class WorkerProcess:
    """One sample worker on one task queue, a :class:`~console.processes.ChildProcess` whose
    log (stdout and stderr) says ``ready`` once it polls."""

    address: str
    task_queue: str
    identity: str
    log_path: Path
    cadence_s: float = 0.5
    child: ChildProcess | None = None

    @property
    def pid(self) -> int:
        assert self.child is not None and self.child.pid is not None
        return self.child.pid

    def start(self, timeout: float = 30.0) -> None:
        # the module lives in the repository, not in the installed package
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        argv = [sys.executable, "-m", "devtools.temporal_sample_worker", self.address,
                self.task_queue, self.identity, str(self.cadence_s)]
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.child = ChildProcess(self.identity, argv, self.log_path, env={"PYTHONPATH": path})
        self.child.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.child.alive():
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                if b"ready" in log.read().split(b"\n"):
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            "worker did not start: " + self.log_path.read_text(errors="replace")[-2000:]
        )

    def kill(self) -> None:
        """SIGKILL: no cleanup, no final heartbeat (a crashed host)."""
        if self.child is not None:
            self.child.kill()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    identity = argv[2] if len(argv) > 2 else "irq-sample-worker"
    cadence = float(argv[3]) if len(argv) > 3 else 0.5
    asyncio.run(serve(argv[0], argv[1], identity, cadence))


if __name__ == "__main__":
    main(sys.argv[1:])
