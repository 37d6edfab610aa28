"""A worker process for ``PolicyAgent`` (``temporal_policy_agents.py``) that takes its policy
from a real gateway's agent channel (``IRQ_AGENT_URL`` / ``IRQ_AGENT_TOKEN`` in its env).

    python -m tests.support.temporal_policy_worker ADDRESS TASK_QUEUE

Prints ``ready`` once polling; runs until stopped.
"""

from __future__ import annotations

import asyncio
import sys


async def serve(address: str, task_queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from backend_adapters.temporal.agent import worker_options
    from tests.support.temporal_policy_agents import ACTIVITIES, WORKFLOWS

    client = await Client.connect(address)
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        **worker_options(cadence_s=0.5),
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
