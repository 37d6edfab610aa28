"""``irq retry`` through a real gateway (``irq serve``) on a real Temporal dev server, with a
worker written as Temporal's samples write one (recovery_worker.py, no irq code): the dry run
names the kept activities and the one that runs again; ``--yes --wait`` resets the failed
workflow and waits until it runs; afterwards activities 1 and 2 ran once and 3 twice
(counted in a file outside Temporal), and the audit entry's action is ``retry``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend_adapters.temporal.dev_server import DevServer
from console.processes import ChildProcess, stop_process
from tests.adapters.temporal.test_temporal_recovery import KEPT, PUBLISH, counts, start_worker
from tests.cli.cli_harness import irq, start_gateway

pytestmark = [pytest.mark.slow]


@dataclass
class Served:
    env: dict[str, str]
    queue: str


@pytest.fixture(scope="module")
def served(temporal_server: DevServer,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    queue = f"rcli-{uuid.uuid4().hex[:8]}"
    home = tmp_path_factory.mktemp("retry-cli-home")
    worker: ChildProcess = start_worker(temporal_server, queue, home / "worker.log")
    try:
        gateway = start_gateway(home, [temporal_server.backend_url(
            rps=100, query=f"TaskQueue='{queue}'", timeout=5, poll=0.3)])
        try:
            yield Served({**gateway.env(gateway.operator), "IRQ_HOME": str(home)}, queue)
        finally:
            stop_process(gateway.process)
    finally:
        worker.stop()


def eventually(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def run_of(env: dict[str, str], wid: str) -> dict[str, Any] | None:
    out = irq("runs", "-o", "json", env=env)
    assert out.code == 0, out.stderr
    return next((r for r in json.loads(out.stdout) if r["native_id"] == wid), None)


def test_retry_resets_a_failed_temporal_run_rerunning_only_the_failed_activity(
        served: Served, temporal_server: DevServer, tmp_path: Path) -> None:
    flag, tally = tmp_path / "flag", tmp_path / "counts"
    flag.touch()
    wid = f"three-{served.queue}"
    temporal_server.start_workflow(wid, "ThreeSteps", served.queue,
                                   {"counts": str(tally), "flag": str(flag)})
    temporal_server.result(wid)
    run = eventually(lambda: (r := run_of(served.env, wid)) and r["state"] == "failed" and r,
                     "the failed run in the gateway")
    run_id = run["id"]

    out = irq("retry", run_id, "--dry-run", "-o", "json", env=served.env)
    assert out.code == 0, out.stdout + out.stderr
    plan = json.loads(out.stdout)
    assert plan["action"] == "retry" and plan["targets"] == [run_id]
    assert (plan["steps_kept"], plan["will_rerun"]) == (KEPT, [PUBLISH])
    assert plan["unjournaled_effects"] == [PUBLISH]
    assert counts(tally) == {"fetch_data": 1, "transform": 1, "publish": 1}  # dry: nothing

    flag.unlink()
    done = irq("retry", run_id, "--yes", "--reason", "downstream fixed", "--wait", "30",
               "-o", "json", env=served.env)
    assert done.code == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    (result,) = answer["results"]
    assert (result["action"], result["outcome"]) == ("retry", "applied")
    assert answer["waited"][0]["target"] == run_id and answer["waited"][0]["ok"]
    closed = temporal_server.result(wid)
    assert closed["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    assert counts(tally) == {"fetch_data": 1, "transform": 1, "publish": 2}
    eventually(lambda: (r := run_of(served.env, wid)) and r["state"] == "completed",
               "the reset run completed in the gateway")

    audit = irq("audit", "--target", run_id, "-o", "json", env=served.env)
    assert audit.code == 0, audit.stderr
    (entry,) = [e for e in json.loads(audit.stdout) if e["outcome"] == "applied"]
    assert entry["action"] == "retry" and entry["reason"] == "downstream fixed"
    assert entry["plan"]["steps_kept"] == KEPT
