"""A Temporal worker written without irq's helpers, the way Temporal's own samples are.

``python tests/adapters/temporal/plain_worker.py ADDRESS TASK_QUEUE [DEPLOYMENT:BUILD_ID]``
prints ``ready`` once it polls, and runs until killed. With ``DEPLOYMENT:BUILD_ID`` it uses
Worker Versioning, its workflows pinned to that version (``VERSIONING_BEHAVIOR_PINNED``).
Its workflows:

- ``HelloCancellation``: Temporal's ``hello_cancellation`` sample: one activity with a 2 s
  heartbeat timeout that calls ``activity.heartbeat()`` (no details) every second until it is
  cancelled; start-to-close 1000 s.
- ``NoHeartbeatTimeout``: one activity with a start-to-close timeout and no heartbeat timeout
  that sleeps (``params["sleep_s"]``, default 600 s) without heartbeating.
- ``Parked``: no activity; waits until cancelled (nothing runs that could heartbeat).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig


@activity.defn
async def never_complete_activity() -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(1)


@activity.defn
async def silent_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


@workflow.defn
class HelloCancellation:
    @workflow.run
    async def run(self, params: dict[str, Any]) -> None:
        await workflow.execute_activity(
            never_complete_activity,
            start_to_close_timeout=timedelta(seconds=1000),
            heartbeat_timeout=timedelta(seconds=2),
        )


@workflow.defn
class NoHeartbeatTimeout:
    @workflow.run
    async def run(self, params: dict[str, Any]) -> None:
        await workflow.execute_activity(
            silent_sleep,
            float(params.get("sleep_s", 600)),
            start_to_close_timeout=timedelta(seconds=float(params.get("start_to_close_s", 900))),
        )


@workflow.defn
class Parked:
    @workflow.run
    async def run(self, params: dict[str, Any]) -> None:
        await workflow.wait_condition(lambda: False)


async def serve(address: str, task_queue: str, version: str = "") -> None:
    client = await Client.connect(address, identity=f"plain-worker-{task_queue}")
    deployment = None
    if version:
        name, _, build = version.partition(":")
        deployment = WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment_name=name, build_id=build),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[HelloCancellation, NoHeartbeatTimeout, Parked],
        activities=[never_complete_activity, silent_sleep],
        deployment_config=deployment,
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:4]))
