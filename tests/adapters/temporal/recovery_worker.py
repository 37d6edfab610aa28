"""A Temporal worker written the way Temporal's samples write one (no irq code), for the
recovery and alert tests.

``python tests/adapters/temporal/recovery_worker.py ADDRESS TASK_QUEUE`` prints ``ready``
once it polls, and runs until killed. Its workflows:

- ``ThreeSteps``: ``fetch_data``, ``transform``, ``publish`` one after the other; each
  appends its name to ``params["counts"]`` (a side effect outside Temporal). ``publish``
  fails with a non-retryable error while the file ``params["flag"]`` exists, so the workflow
  fails. Between the activities it listens for a ``note`` signal (kept in its result).
- ``AlwaysFailing``: one activity, ``flaky_call``, that always raises, retried forever every
  half second (``maximum_interval`` 0.5 s).
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


def _count(path: str, name: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(name + "\n")


@activity.defn
async def fetch_data(counts: str) -> str:
    _count(counts, "fetch_data")
    return "rows"


@activity.defn
async def transform(counts: str, rows: str) -> str:
    _count(counts, "transform")
    return rows.upper()


@activity.defn
async def publish(counts: str, flag: str, data: str) -> str:
    _count(counts, "publish")
    if Path(flag).exists():
        raise ApplicationError("downstream rejected the batch", type="PublishRejected",
                               non_retryable=True)
    return f"published {data}"


@activity.defn
async def flaky_call() -> None:
    raise ApplicationError("upstream 503", type="UpstreamUnavailable")


@workflow.defn
class ThreeSteps:
    def __init__(self) -> None:
        self.notes: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        once = RetryPolicy(maximum_attempts=1)
        timeout = timedelta(seconds=30)
        rows = await workflow.execute_activity(
            fetch_data, params["counts"], start_to_close_timeout=timeout, retry_policy=once
        )
        data = await workflow.execute_activity(
            transform, args=[params["counts"], rows], start_to_close_timeout=timeout,
            retry_policy=once,
        )
        result = await workflow.execute_activity(
            publish, args=[params["counts"], params["flag"], data],
            start_to_close_timeout=timeout, retry_policy=once,
        )
        return {"result": result, "notes": self.notes}


@workflow.defn
class AlwaysFailing:
    @workflow.run
    async def run(self, params: dict[str, Any]) -> None:
        await workflow.execute_activity(
            flaky_call,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=500),
                backoff_coefficient=1.0,
                maximum_interval=timedelta(milliseconds=500),
            ),
        )


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[ThreeSteps, AlwaysFailing],
        activities=[fetch_data, transform, publish, flaky_call],
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
