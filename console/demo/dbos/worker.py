"""One demo worker process: a DBOS executor running agent "lanes" (``python -m``).

    python -m console.demo.dbos.worker --db PATH --executor-id demo-worker-1 --lanes 0,3,6 \
        [--guarded]

``--db`` is a SQLite file, or a database URL (``postgresql://user@host/db``, which then
needs ``--board``).

Each lane keeps one agent alive: it starts workflow ``<kind>-<lane>-<gen>``, waits while it is
active or paused, then starts the next generation. A worker restarted with the same executor
id (and the pinned application version) recovers its PENDING workflows itself, so the lanes
simply wait on them. The worker also serves the ``irq-demo`` queue, so tests and tools can
enqueue plans for ``irq_demo_agent`` with a DBOSClient (and the fleet its month-end close,
console/demo/dbos/month_end.py). ``--showcase-lanes`` adds the stuck and the slow agent of
console/demo/dbos/showcase.py. With ``--guarded`` the lanes' agents call
their tools through the policy guard (the gateway's policy decides); without it they raise the
plain interrupts the demo raised before policies (for a gateway that runs without one).

SIGTERM/SIGINT end the process at once, like a preemption: running workflows stay PENDING and
are recovered when a worker with this executor id starts again.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID, WorkflowStatus

from backend_adapters.dbos.agent import agent_config, configure_agent
from backend_adapters.dbos.conventions import ACTIVE_STATUSES, ATTR_INTENT
from console.demo.dbos import (
    month_end,  # noqa: F401 - registers month_end_close
    purchase_approval,  # noqa: F401 - registers purchase_approval
)
from console.demo.dbos.agents import APP_NAME, APP_VERSION, QUEUE, irq_demo_agent
from console.demo.dbos.plans import lane_prefix, plan_for
from console.demo.dbos.showcase import SHOWCASE_KINDS

PlanBuilder = Callable[[int, int, random.Random], dict[str, Any]]

log = logging.getLogger("irq.demo.worker")


def _generation(workflow_id: str) -> int:
    try:
        return int(workflow_id.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


def _paused(status: WorkflowStatus) -> bool:
    attrs = status.attributes if isinstance(status.attributes, dict) else {}
    intent = attrs.get(ATTR_INTENT)
    return (
        status.status == "CANCELLED"
        and isinstance(intent, dict)
        and (intent.get("action") == "pause")
    )


class Lane:
    """Keeps one agent of one kind running, generation after generation."""

    def __init__(
        self,
        lane: int,
        settings: dict[str, Any],
        stop: threading.Event,
        kind: tuple[str, PlanBuilder] | None = None,
    ) -> None:
        self.lane = lane
        # a showcase lane runs its own kind; the others run their lane number's kind
        self.prefix = f"{kind[0]}-{lane:02d}-" if kind else lane_prefix(lane)
        self.builder = kind[1] if kind else None
        self.settings = settings
        self.stop = stop
        self.rng = random.Random(lane)

    def latest(self) -> WorkflowStatus | None:
        found = DBOS.list_workflows(
            workflow_id_prefix=self.prefix,
            sort_desc=True,
            limit=5,
            load_input=False,
            load_output=False,
        )
        return max(found, key=lambda s: _generation(s.workflow_id), default=None)

    def run(self) -> None:
        first = True
        while not self.stop.is_set():
            try:
                latest = self.latest()
                if latest is not None and (latest.status in ACTIVE_STATUSES or _paused(latest)):
                    self.stop.wait(3.0)
                    continue
                if latest is not None or not first:
                    self.stop.wait(self.rng.uniform(3.0, 8.0) * self.settings["step_scale"])
                    if self.stop.is_set():
                        return
                first = False
                gen = _generation(latest.workflow_id) + 1 if latest else 1
                plan = plan_for(
                    self.lane,
                    gen,
                    board=self.settings["board"],
                    log=self.settings["log"],
                    step_scale=self.settings["step_scale"],
                    interval_s=self.settings["interval_s"],
                    timeout_s=self.settings["timeout_s"],
                    guarded=self.settings["guarded"],
                    builder=self.builder,
                )
                with SetWorkflowID(f"{self.prefix}{gen:04d}"):
                    DBOS.start_workflow(irq_demo_agent, plan)
            except Exception:
                log.exception("lane %d: could not start the next agent", self.lane)
                self.stop.wait(5.0)


def _watch_parent(stop: threading.Event) -> None:
    parent = os.getppid()
    while not stop.wait(1.0):
        if os.getppid() != parent:  # the supervisor died: do not linger as an orphan
            stop.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.demo.dbos.worker")
    parser.add_argument(
        "--db", required=True, help="DBOS system database: SQLite file or postgresql:// URL"
    )
    parser.add_argument("--executor-id", required=True)
    parser.add_argument("--lanes", default="", help="comma-separated lane numbers to run")
    parser.add_argument(
        "--showcase-lanes",
        default="",
        help="lane numbers for the showcase agents (console/demo/dbos/showcase.py), in order",
    )
    parser.add_argument("--board", type=Path, help="reservation directory (default: next to db)")
    parser.add_argument("--log", type=Path, help="JSON-lines execution log (default: none)")
    parser.add_argument("--step-scale", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=2.0, help="heartbeat cadence (s)")
    parser.add_argument("--timeout", type=float, default=10.0, help="heartbeat timeout (s)")
    parser.add_argument("--queue", default=QUEUE, help=f"queue to serve (default {QUEUE})")
    parser.add_argument("--queue-poll", type=float, default=1.0)
    parser.add_argument("--watch-parent", action="store_true")
    parser.add_argument(
        "--guarded", action="store_true", help="tool calls go through the policy guard"
    )
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if "://" in args.db:  # a database URL (Postgres): no file to place the board next to
        if args.board is None:
            parser.error("--board is required when --db is a URL")
        url = args.db
        board = args.board.resolve()
    else:
        db = Path(args.db).resolve()
        db.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{db}"
        board = (args.board or db.with_name(db.stem + "-reservations")).resolve()
    DBOS(config=agent_config(APP_NAME, url, app_version=APP_VERSION, executor_id=args.executor_id))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    configure_agent(url)  # before launch: launch() starts recovered workflows at once
    DBOS.launch()
    DBOS.register_queue(args.queue, polling_interval_sec=args.queue_poll)
    print(f"worker {args.executor_id} ready (pid {os.getpid()})", flush=True)

    settings = {
        "board": str(board),
        "log": str(args.log.resolve()) if args.log else None,
        "step_scale": args.step_scale,
        "interval_s": args.interval,
        "timeout_s": args.timeout,
        "guarded": args.guarded,
    }
    lanes = [int(x) for x in args.lanes.split(",") if x.strip()]
    for lane in lanes:
        threading.Thread(
            target=Lane(lane, settings, stop).run, name=f"lane-{lane}", daemon=True
        ).start()
    showcase = [int(x) for x in args.showcase_lanes.split(",") if x.strip()]
    for lane, kind in zip(showcase, SHOWCASE_KINDS, strict=False):
        threading.Thread(
            target=Lane(lane, settings, stop, kind).run, name=f"lane-{lane}", daemon=True
        ).start()
    if args.watch_parent:
        threading.Thread(target=_watch_parent, args=(stop,), daemon=True).start()
    while not stop.wait(1.0):
        pass
    # leave like a preemption: workflows stay PENDING and recover on the next start
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
