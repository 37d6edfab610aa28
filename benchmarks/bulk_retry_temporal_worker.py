"""The Temporal side of benchmarks/bulk_retry.py: a worker written the way Temporal's samples
write one (no irq imports). ``Pipeline`` runs three activities, each tried once; the third,
``publish``, fails (non-retryable) while the file ``params["flag"]`` exists, so the workflow
fails. Every activity execution appends ``ACTIVITY NAME`` to ``params["counts"]`` (and a
successful publish ``published NAME``).

    python benchmarks/bulk_retry_temporal_worker.py ADDRESS TASK_QUEUE

prints ``ready`` once it polls and runs until stopped.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker


def _record(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


@activity.defn
async def fetch_data(params: dict[str, Any]) -> str:
    _record(params["counts"], f"fetch_data {params['name']}")
    return "rows"


@activity.defn
async def transform(params: dict[str, Any], rows: str) -> str:
    _record(params["counts"], f"transform {params['name']}")
    return rows.upper()


@activity.defn
async def publish(params: dict[str, Any], table: str) -> str:
    _record(params["counts"], f"publish {params['name']}")
    if Path(params["flag"]).exists():
        raise ApplicationError("downstream rejected the batch", type="PublishRejected",
                               non_retryable=True)
    _record(params["counts"], f"published {params['name']}")
    return f"published {table}"


@workflow.defn
class Pipeline:
    @workflow.run
    async def run(self, params: dict[str, Any]) -> str:
        once = RetryPolicy(maximum_attempts=1)
        timeout = timedelta(seconds=60)
        rows = await workflow.execute_activity(
            fetch_data, params, start_to_close_timeout=timeout, retry_policy=once)
        table = await workflow.execute_activity(
            transform, args=[params, rows], start_to_close_timeout=timeout, retry_policy=once)
        return await workflow.execute_activity(
            publish, args=[params, table], start_to_close_timeout=timeout, retry_policy=once)


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address)
    worker = Worker(client, task_queue=task_queue, workflows=[Pipeline],
                    activities=[fetch_data, transform, publish])
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
