"""``irq drill`` on the demo's Temporal worker: the dev server and worker of the demo's
Temporal extension under a real gateway; the requests the demo context's preempt_command
makes are answered by ``serve_launcher_requests`` (what ``irq demo``'s wait loop calls), which
SIGKILLs the worker the test started and starts it again; the drill reports the recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_harness import ROOT, gateway_ready, irq
from test_demo_policy_temporal import _start_extension

from console.demo.preemption import control_dir, preempt_command, serve_launcher_requests
from console.processes import ChildProcess, free_port, stop_process

pytestmark = [pytest.mark.slow]


@pytest.fixture
def temporal_demo(irq_home: Path) -> Iterator[tuple[list[ChildProcess], str]]:
    from console.gateway.auth import create_token
    from console.model import Role

    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    operator = create_token(Role.OPERATOR, "drill-operator", irq_home)
    agent = create_token(Role.AGENT, "drill-agent", irq_home, scopes=("temporal:local",))
    # Temporal retries the step of the SIGKILLed worker once its heartbeat timeout passes:
    # 4 s, not the demo's 10 s
    processes, backend = _start_extension(irq_home, url, agent, 1.0, "--heartbeat-timeout", "4")
    stop = threading.Event()
    log = open(irq_home / "serve.log", "ab")  # noqa: SIM115 - closed below
    gateway: subprocess.Popen[bytes] | None = None
    server = threading.Thread(
        target=lambda: [serve_launcher_requests(control_dir(irq_home), processes)
                        for _ in iter(lambda: stop.wait(0.3), True)],
        daemon=True,
    )
    try:
        gateway = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
             "--backend", backend],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not gateway_ready(url, operator):
            assert gateway.poll() is None, (irq_home / "serve.log").read_text()
            assert time.monotonic() < deadline, "irq serve did not answer"
            time.sleep(0.2)
        processes[-1].start()
        (irq_home / "config.toml").write_text(
            f'current_context = "demo"\n[contexts.demo]\nurl = "{url}"\n'
            f"token = \"{operator}\"\npreempt_command = '{preempt_command(irq_home)}'\n"
        )
        server.start()
        yield processes, backend
    finally:
        stop.set()
        for process in reversed(processes):
            process.stop(grace_s=10)
        if gateway is not None:
            stop_process(gateway)
        log.close()


def test_a_drill_on_the_demo_temporal_worker_recovers_cleanly(
    temporal_demo: tuple[list[ChildProcess], str],
) -> None:
    processes, backend = temporal_demo
    # the db janitor's first step (a 7.5 s table scan) beating: the drill re-runs a short
    # step, whichever lane beats first (a GPU job's training step re-ran for up to 30 s)
    deadline = time.monotonic() + 60
    while True:
        out = irq("runs", "-o", "json")
        runs = json.loads(out.stdout) if out.code == 0 else []
        if any(r["backend"] == "temporal" and r["state"] == "running"
               and r["native_id"].startswith("db-janitor-")
               and r["heartbeat_age_s"] is not None for r in runs):
            break
        assert time.monotonic() < deadline, out.stdout + out.stderr
        time.sleep(0.5)
    worker_pid = processes[-1].pid
    result = irq("drill", "--filter", "backend:temporal db-janitor", "--yes", "-o", "json",
                 "--timeout", "60")
    print(result.stdout, result.stderr)
    assert processes[-1].pid != worker_pid  # killed and started again
    assert result.code == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["results"]
    assert row["backend"] == "temporal" and row["clean"] and row["completed_steps_rerun"] == []
    # not irq's verdict alone: Temporal's own record of the workflow shows the activity the
    # killed worker ran being retried (a second attempt) and no activity run twice to
    # completion
    http_url = backend.removeprefix("temporal+").split("?")[0].rsplit("/", 1)[0]
    wid = row["run_id"].partition("/")[2]
    deadline = time.monotonic() + 90
    while _latest_attempt(http_url, wid) < 2:
        assert time.monotonic() < deadline, f"Temporal shows no retried activity for {wid}"
        time.sleep(0.5)
    completed = _completed_activity_ids(http_url, wid)
    assert len(completed) == len(set(completed)), completed


def _workflow_url(http_url: str, wid: str) -> str:
    return f"{http_url}/api/v1/namespaces/default/workflows/{wid}"


def _latest_attempt(http_url: str, wid: str) -> int:
    """The highest activity attempt Temporal records for the workflow: its pending
    activities (describe) and the attempts its history's ActivityTaskStarted events name."""
    described = httpx.get(_workflow_url(http_url, wid), timeout=10).json()
    attempts = [int(a.get("attempt", 1)) for a in described.get("pendingActivities") or []]
    events = (httpx.get(_workflow_url(http_url, wid) + "/history", timeout=10).json()
              .get("history") or {}).get("events") or []
    attempts += [int(e["activityTaskStartedEventAttributes"].get("attempt", 1))
                 for e in events if e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_STARTED"]
    return max(attempts, default=0)


def _completed_activity_ids(http_url: str, wid: str) -> list[str]:
    """The activity ids of every ActivityTaskCompleted in the history (via its scheduled
    event)."""
    events = (httpx.get(_workflow_url(http_url, wid) + "/history", timeout=10).json()
              .get("history") or {}).get("events") or []
    scheduled = {e["eventId"]: e["activityTaskScheduledEventAttributes"]["activityId"]
                 for e in events if e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"}
    return [scheduled[e["activityTaskCompletedEventAttributes"]["scheduledEventId"]]
            for e in events if e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED"]
