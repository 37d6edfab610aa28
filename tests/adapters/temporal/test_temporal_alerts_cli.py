"""Alerts from Temporal through a real gateway (``irq serve``) on the shared dev server, read
with ``irq alerts -o json`` (issue 24's "Tests"). The workflows are recovery_worker.py's,
written as Temporal's samples write them (no irq code):

- a workflow on a task queue that no worker polls raises one ``no_workers`` alert naming the
  queue and what to do; a webhook routed with ``events = ["no_workers"]`` receives exactly one
  POST for it; a worker starting on the queue clears the alert by itself;
- an activity whose retry policy never gives up raises ``retrying`` with its numeric attempt
  once it reached ``--retrying-after`` (2 here).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend_adapters.temporal.dev_server import DevServer
from console.processes import ChildProcess, stop_process
from tests.adapters.temporal.test_temporal_recovery import start_worker
from tests.cli.cli_harness import ServedGateway, irq, start_gateway
from tests.support.webhook_receiver import Receiver, webhook_receiver

pytestmark = [pytest.mark.slow]


@dataclass
class Served:
    gateway: ServedGateway
    receiver: Receiver
    home: Path
    lonely: str  # nobody polls it until the first test starts a worker
    busy: str  # polled from the start

    def alerts(self, *extra: str) -> list[dict[str, Any]]:
        out = irq("alerts", "-o", "json", *extra, "--url", self.gateway.url, "--token",
                  self.gateway.operator, env={"IRQ_HOME": str(self.home)})
        assert out.code == 0, out.stdout + out.stderr
        listed: list[dict[str, Any]] = json.loads(out.stdout)
        return listed


@pytest.fixture(scope="module")
def served(temporal_server: DevServer,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tag = uuid.uuid4().hex[:8]
    lonely, busy = f"lonely-{tag}", f"busy-{tag}"
    home = tmp_path_factory.mktemp("temporal-alerts")
    worker: ChildProcess = start_worker(temporal_server, busy, home / "worker.log")
    with webhook_receiver() as receiver:
        notify = home / "notify.toml"
        notify.write_text(receiver.notify_config(["no_workers"]))
        query = f"TaskQueue='{lonely}' OR TaskQueue='{busy}'"
        try:
            gateway = start_gateway(
                home, [temporal_server.backend_url(rps=100, query=query, timeout=5, poll=0.3)],
                extra_args=["--alert-grace", "1s", "--retrying-after", "2",
                            "--notify-config", str(notify)])
            try:
                yield Served(gateway, receiver, home, lonely, busy)
            finally:
                stop_process(gateway.process)
        finally:
            worker.stop()


def eventually(check: Callable[[], Any], what: str, timeout: float = 45) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def test_a_queue_nobody_polls_raises_no_workers_once_and_a_worker_starting_clears_it(
        served: Served, temporal_server: DevServer, tmp_path: Path) -> None:
    wid = f"stuck-{served.lonely}"
    temporal_server.start_workflow(wid, "ThreeSteps", served.lonely,
                                   {"counts": str(tmp_path / "counts"), "flag": "/nonexistent"})
    queue_suffix = f"/task-queue/{served.lonely}"

    def open_alert() -> dict[str, Any] | None:
        return next((a for a in served.alerts() if a["kind"] == "no_workers"
                     and a["subject"].endswith(queue_suffix)), None)

    alert = eventually(open_alert, "the no_workers alert")
    assert alert["state"] == "open" and alert["run"] is None
    assert alert["backend"] == "temporal" and alert["context"]
    assert alert["subject"] == f"temporal:{alert['context']}{queue_suffix}"
    assert f"task queue '{served.lonely}'" in alert["detail"]
    assert "1 running workflow " in alert["detail"]
    assert alert["action"] == f"start a worker polling task queue {served.lonely}"
    assert alert["facts"]["sample"] == [wid]
    [post] = eventually(lambda: served.receiver.of_kind("no_workers"), "the webhook POST")
    assert post["alert"]["id"] == alert["id"] and served.lonely in post["message"]

    worker = start_worker(temporal_server, served.lonely, tmp_path / "late-worker.log")
    try:
        def cleared() -> dict[str, Any] | None:
            found = next((a for a in served.alerts("--all") if a["id"] == alert["id"]), None)
            return found if found is not None and found["state"] == "cleared" else None

        gone = eventually(cleared, "the no_workers alert cleared by itself")
        assert gone["cleared_at"] and open_alert() is None
        temporal_server.result(wid)  # the worker ran the workflow to its end
    finally:
        worker.stop()
    assert [p["alert"]["id"] for p in served.receiver.posts] == [alert["id"]]


def test_an_activity_that_always_fails_raises_retrying_with_its_attempt(
        served: Served, temporal_server: DevServer) -> None:
    wid = f"flaky-{served.busy}"
    temporal_server.start_workflow(wid, "AlwaysFailing", served.busy, {})
    try:
        alert = eventually(lambda: next((a for a in served.alerts() if a["kind"] == "retrying"
                                         and a["run"].endswith(f"/{wid}")), None),
                           "the retrying alert")
        assert isinstance(alert["attempt"], int) and alert["attempt"] >= 2
        assert alert["backend"] == "temporal" and alert["subject"] == alert["run"]
        assert "flaky_call (activity 1)" in alert["detail"]
        assert "UpstreamUnavailable: upstream 503" in alert["detail"]
        assert "next attempt at" in alert["detail"]
        assert alert["run"] in alert["action"]
        assert alert["facts"]["retrying"]["attempt"] >= 2
        # the attempt count follows the engine's as it keeps failing
        eventually(lambda: any(a["id"] == alert["id"] and a["attempt"] > alert["attempt"]
                               for a in served.alerts()), "a later attempt in the alert")
    finally:
        httpx.post(f"{temporal_server.http_url}/api/v1/namespaces/default/workflows/{wid}"
                   "/terminate", json={"reason": "test over"}, timeout=10).raise_for_status()
    eventually(lambda: all(a["id"] != alert["id"] for a in served.alerts()),
               "the retrying alert cleared once the workflow ended")
    assert served.receiver.of_kind("retrying") == []  # routed to no_workers only
