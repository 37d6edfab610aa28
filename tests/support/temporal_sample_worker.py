"""A worker process for the sample agents: ``python -m backend_adapters.temporal.sample_worker
ADDRESS TASK_QUEUE [IDENTITY] [CADENCE_S]``. Prints ``ready`` once polling; runs until killed.
"""

from __future__ import annotations

import asyncio
import sys

from temporalio.client import Client
from temporalio.worker import Worker

from backend_adapters.temporal.agent import worker_options
from backend_adapters.temporal.sample_agents import ACTIVITIES, WORKFLOWS


async def serve(address: str, task_queue: str, identity: str, cadence_s: float) -> None:
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


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    identity = argv[2] if len(argv) > 2 else "irq-sample-worker"
    cadence = float(argv[3]) if len(argv) > 3 else 0.5
    asyncio.run(serve(argv[0], argv[1], identity, cadence))


if __name__ == "__main__":
    main(sys.argv[1:])
