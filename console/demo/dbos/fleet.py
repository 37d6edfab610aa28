"""The demo fleet: real DBOS agents on SQLite, with preemptions (``python -m``).

    python -m console.demo.dbos.fleet --db PATH [--agents N] [--workers W] [--preempt-every S]
        [--guarded] [--showcase]

A supervisor that runs W worker processes (console/demo/dbos/worker.py) sharing N agent lanes.
Every ``--preempt-every`` seconds one worker is SIGKILLed (a spot eviction, say) and, after
``--downtime`` seconds, restarted with the same executor id and application version: its
runs first go silent (late, then lost, on the console), then DBOS recovers them
(``recovery_attempts`` > 1: preempted), replaying journaled steps and re-running the step
that was in flight. Agents heartbeat to the gateway named by IRQ_AGENT_URL / IRQ_AGENT_TOKEN
(inherited by the workers); with ``--guarded`` their tool calls go through the policy guard,
so the gateway's policy (``irq serve --policy``) decides them. SIGTERM / SIGINT stop every
worker by its pid, then exit.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from console.demo.dbos.approval_lane import ApprovalLane
from console.processes import ChildProcess, stop_together


@dataclass
class Worker:
    index: int
    lanes: list[int]
    process: ChildProcess | None = None
    down_until: float = 0.0  # monotonic time at which a preempted worker comes back

    @property
    def executor_id(self) -> str:
        return f"demo-worker-{self.index}"


@dataclass
class Fleet:
    """Supervises the worker processes of one demo database."""

    db: Path
    agents: int = 10
    workers: int = 3
    preempt_every_s: float | None = 90.0
    downtime_s: float = 15.0
    step_scale: float = 1.0
    log: Path | None = None
    guarded: bool = False
    #: the showcase (console/demo/dbos/showcase.py): a month-end close that fails until
    #: retried, a stuck and a slow agent (two more lanes on the first worker)
    showcase: bool = False
    env: Mapping[str, str] | None = None
    members: list[Worker] = field(default_factory=list)
    #: with the showcase: the purchase approvals waiting in their own DBOS.recv, and the
    #: seconds between one ending and the next (None: approval_lane.REST_S)
    approvals: ApprovalLane | None = None
    approval_rest_s: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.db = self.db.resolve()
        count = max(1, min(self.workers, self.agents))
        self.members = [
            Worker(i + 1, [lane for lane in range(self.agents) if lane % count == i])
            for i in range(count)
        ]

    # ------------------------------------------------------------------------ processes

    def _command(self, worker: Worker) -> list[str]:
        cmd = [
            sys.executable, "-m", "console.demo.dbos.worker",
            "--db", str(self.db),
            "--executor-id", worker.executor_id,
            "--lanes", ",".join(str(lane) for lane in worker.lanes),
            "--step-scale", str(self.step_scale),
            "--watch-parent",
        ]  # fmt: skip
        if self.log:
            cmd += ["--log", str(self.log)]
        if self.guarded:
            cmd.append("--guarded")
        if self.showcase and worker is self.members[0]:
            cmd += ["--showcase-lanes", f"{self.agents},{self.agents + 1}"]
        return cmd

    def _spawn(self, worker: Worker) -> None:
        # no log file of its own: a worker writes to the fleet's stdout/stderr
        worker.process = ChildProcess(
            worker.executor_id, self._command(worker), None, env=dict(self.env or {})
        )
        worker.process.start()
        self._say(f"started {worker.executor_id} (pid {worker.process.pid}) lanes {worker.lanes}")

    def _say(self, text: str) -> None:
        print(f"[fleet] {text}", file=sys.stderr, flush=True)

    def start(self) -> None:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        for i, worker in enumerate(self.members):
            self._spawn(worker)
            if i == 0:
                self._wait_for_db(20.0)  # the first worker creates the schema
        if self.showcase:
            self._start_month_end_close()
            from console.demo.dbos.agents import APP_VERSION, QUEUE

            rest = self.approval_rest_s
            self.approvals = ApprovalLane(
                f"sqlite:///{self.db}", queue=QUEUE, app_version=APP_VERSION,
                **({} if rest is None else {"rest_s": (rest, rest)}))

    def _start_month_end_close(self) -> None:
        from console.demo.dbos.agents import APP_VERSION, QUEUE
        from console.demo.dbos.showcase import start_month_end_close

        try:
            started = start_month_end_close(
                f"sqlite:///{self.db}", self.db.parent / "outbox", queue=QUEUE,
                app_version=APP_VERSION,
            )
        except Exception as exc:  # noqa: BLE001 - the fleet runs on without it
            self._say(f"could not start the month-end close: {type(exc).__name__}: {exc}")
            return
        self._say(f"started {started}" if started else
                  "the last month-end close is still running or waiting for a retry")

    def _wait_for_db(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._stop.is_set():
            if self.db.exists() and self.db.stat().st_size > 0:
                time.sleep(1.0)
                return
            time.sleep(0.2)

    def preempt(self, worker: Worker) -> None:
        """SIGKILL ``worker`` (no cleanup, like an eviction); it returns after the downtime."""
        process = worker.process
        if process is None or not process.alive():
            return
        process.kill()
        worker.process = None
        worker.down_until = time.monotonic() + self.downtime_s
        self._say(
            f"preempted {worker.executor_id} (SIGKILL pid {process.pid}); back in "
            f"{self.downtime_s:g}s"
        )

    def _preemptible(self) -> list[Worker]:
        """The workers the fleet evicts in turn: not the showcase's (when there is another),
        whose stuck agent must stay stuck long enough to be seen stalled, and whose slow
        agent must keep moving."""
        if self.showcase and len(self.members) > 1:
            return self.members[1:]
        return self.members

    def _tend_approvals(self) -> None:
        assert self.approvals is not None
        try:
            started = self.approvals.tend()
        except Exception as exc:  # noqa: BLE001 - the fleet runs on; tried again soon
            self._say(f"could not tend the purchase approvals: {type(exc).__name__}: {exc}")
            return
        if started:
            self._say(f"started {started} (waits in DBOS.recv for an approver)")

    def request_stop(self) -> None:
        """Make supervise() return (safe from a signal handler)."""
        self._stop.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop every worker by its pid: SIGTERM, then SIGKILL after ``timeout_s``."""
        self._stop.set()
        if self.approvals is not None:
            self.approvals.close()
        stop_together([w.process for w in self.members if w.process is not None], timeout_s)
        for worker in self.members:
            worker.process = None

    # ----------------------------------------------------------------------- supervision

    def supervise(self) -> None:
        """Restart crashed and preempted workers; preempt one now and then. Until stop()."""
        next_preempt = (
            time.monotonic() + self.preempt_every_s if self.preempt_every_s else float("inf")
        )
        from console.demo.preemption import serve_fleet_requests  # irq drill's requests

        victim, next_tend = 0, 0.0
        while not self._stop.wait(0.5):
            serve_fleet_requests(self)
            now = time.monotonic()
            if self.approvals is not None and now >= next_tend:
                next_tend = now + 3.0
                self._tend_approvals()
            for worker in self.members:
                if worker.process is not None and worker.process.exit_code() is not None:
                    self._say(f"{worker.executor_id} exited ({worker.process.exit_code()})")
                    worker.process.stop()  # reaps it
                    worker.process = None
                    worker.down_until = now + 3.0
                if worker.process is None and now >= worker.down_until:
                    self._spawn(worker)
            if now >= next_preempt and self.preempt_every_s:
                victims = self._preemptible()
                self.preempt(victims[victim % len(victims)])
                victim += 1
                next_preempt = now + self.preempt_every_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m console.demo.dbos.fleet", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--db", required=True, type=Path, help="SQLite system database file")
    parser.add_argument("--agents", type=int, default=10, help="agent lanes (default 10)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument(
        "--preempt-every",
        type=float,
        default=90.0,
        help="seconds between worker preemptions (SIGKILL + restart); 0 disables",
    )
    parser.add_argument("--downtime", type=float, default=15.0, help="seconds a worker stays down")
    parser.add_argument("--step-scale", type=float, default=1.0, help="multiply step durations")
    parser.add_argument("--log", type=Path, help="JSON-lines execution log of every step")
    parser.add_argument(
        "--guarded",
        action="store_true",
        help="agents call their tools through the policy guard (the gateway's policy decides)",
    )
    parser.add_argument(
        "--showcase",
        action="store_true",
        help="also a month-end close that fails until retried, a stuck and a slow agent, and "
        "a purchase approval waiting in its own DBOS.recv",
    )
    parser.add_argument(
        "--approval-rest", type=float, default=None, metavar="SECONDS",
        help="with --showcase: seconds between a purchase approval ending and the next",
    )
    args = parser.parse_args(argv)

    fleet = Fleet(
        db=args.db,
        agents=max(1, args.agents),
        workers=max(1, args.workers),
        preempt_every_s=args.preempt_every or None,
        downtime_s=args.downtime,
        step_scale=args.step_scale,
        log=args.log.resolve() if args.log else None,
        guarded=args.guarded,
        showcase=args.showcase,
        approval_rest_s=args.approval_rest,
    )

    def on_signal(signum: int, _frame: object) -> None:
        fleet.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fleet.start()
    fleet._say(
        f"{fleet.agents} agents on {len(fleet.members)} workers, db {fleet.db}; "
        f"backend URL: dbos+sqlite:///{fleet.db}"
    )
    try:
        fleet.supervise()
    finally:
        fleet.stop()
        fleet._say("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
