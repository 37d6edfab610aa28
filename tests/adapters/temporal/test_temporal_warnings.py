"""Recoverability warnings and liveness truth, end to end: workflows written without irq's
helpers (``plain_worker.py``) on the real dev server, seen through a real gateway (``irq
serve``), the real CLI and the TUI (Pilot)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from textual.widgets import Static

from backend_adapters.temporal.dev_server import DevServer
from console.processes import ChildProcess, stop_process
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.run_detail import RunDetailScreen
from tests.cli.cli_harness import ServedGateway, irq, start_gateway

PLAIN_WORKER = Path(__file__).with_name("plain_worker.py")
REPO = Path(__file__).resolve().parents[3]
PLAIN_RUNNING = re.compile(r"\brunning\b(?!\?)")


def start_plain_worker(
    server: DevServer, task_queue: str, log: Path, version: str = ""
) -> ChildProcess:
    child = ChildProcess(
        "plain-worker",
        [sys.executable, str(PLAIN_WORKER), server.address, task_queue, *[version][: bool(version)]],
        log,
        env={"PYTHONPATH": str(REPO)},
    )
    child.start()
    wait_for(lambda: "ready" in log.read_text(errors="replace"), "the worker polls", 60)
    return child


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def runs_json(gw: ServedGateway, home: Path) -> dict[str, dict[str, Any]]:
    out = irq("runs", "-o", "json", env={**gw.env(gw.operator), "IRQ_HOME": str(home)})
    assert out.code == 0, out.stderr
    return {r["native_id"]: r for r in json.loads(out.stdout)}


@pytest.fixture
def gateway_for(
    temporal_server: DevServer, tmp_path: Path
) -> Iterator[Callable[[str], ServedGateway]]:
    started: list[ServedGateway] = []

    def start(task_queue: str, **params: Any) -> ServedGateway:
        home = tmp_path / f"home-{len(started)}"
        home.mkdir()
        url = temporal_server.backend_url(query=f"TaskQueue='{task_queue}'", **params)
        gw = start_gateway(home, backends=[url])
        started.append(gw)
        return gw

    yield start
    for gw in started:
        stop_process(gw.process)


@pytest.fixture
def workers() -> Iterator[list[ChildProcess]]:
    children: list[ChildProcess] = []
    yield children
    for child in children:
        child.stop()


def pin_current_version(server: DevServer, deployment: str, build_id: str) -> None:
    """Make ``deployment:build_id`` the current version (once its worker polls)."""
    url = f"{server.http_url}/api/v1/namespaces/default/worker-deployments/{deployment}"

    def accepted() -> bool:
        r = httpx.post(f"{url}/set-current-version", json={"buildId": build_id}, timeout=5)
        return r.status_code == 200

    wait_for(accepted, f"{deployment}:{build_id} to become current", 60)


def test_a_run_without_heartbeat_timeout_carries_the_warning_in_cli_and_tui(
    temporal_server: DevServer,
    gateway_for: Callable[..., ServedGateway],
    workers: list[ChildProcess],
    task_queue: str,
    tmp_path: Path,
) -> None:
    # a pinned worker (Worker Versioning): its runs carry no version warning, so a parked
    # run (nothing that could heartbeat) has no warning at all and ``has:warning`` can tell
    workers.append(
        start_plain_worker(temporal_server, task_queue, tmp_path / "w.log", "irq-test:v1")
    )
    pin_current_version(temporal_server, "irq-test", "v1")
    nohb, parked = f"nohb-{task_queue}", f"parked-{task_queue}"
    temporal_server.start_workflow(nohb, "NoHeartbeatTimeout", task_queue, {})
    temporal_server.start_workflow(parked, "Parked", task_queue, {})
    gw = gateway_for(task_queue, rps=50)
    home = gw.home

    def both_described() -> dict[str, dict[str, Any]] | None:
        runs = runs_json(gw, home)
        ready = (
            nohb in runs
            and parked in runs
            and runs[nohb]["in_flight_step"]
            and runs[parked]["version_pinned"] is True
        )
        return runs if ready else None

    runs = wait_for(both_described, "both runs described by the gateway")
    assert runs[nohb]["warnings"] == [
        "no heartbeat timeout: a dead worker is noticed at the step's own timeout (900s)"
    ]
    assert runs[nohb]["heartbeat_timeout_s"] is None and runs[nohb]["step_timeout_s"] == 900
    assert runs[nohb]["version_pinned"] is True and runs[nohb]["app_version"] == "irq-test:v1"
    assert runs[parked]["warnings"] == [] and runs[parked]["heartbeat_expected"] is False

    env = {**gw.env(gw.operator), "IRQ_HOME": str(home), "COLUMNS": "220"}
    table = irq("runs", env=env)
    assert table.code == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines() if "temporal:" in line}
    assert "⚠1" in rows[f"temporal:local/{nohb}"]
    assert "⚠" not in rows[f"temporal:local/{parked}"]
    shown = irq("show", f"temporal:local/{nohb}", env=env)
    assert shown.code == 0, shown.stderr
    assert "Recoverability warnings" in shown.stdout
    assert "⚠ no heartbeat timeout: a dead worker is noticed at the step's own timeout" in (
        shown.stdout
    )
    # the plan of a pause says what the missing timeout does to it on Temporal
    dry = irq("pause", f"temporal:local/{nohb}", "--dry-run", "-o", "json", env=env)
    assert dry.code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert any("sees the request only when it completes" in w for w in plan["warnings"]), plan

    asyncio.run(tui_shows_the_warning(gw, f"temporal:local/{nohb}", f"temporal:local/{parked}"))


async def tui_shows_the_warning(gw: ServedGateway, nohb_id: str, parked_id: str) -> None:
    """The TUI: the fleet's has:warning filter, and the run detail's Recoverability section."""
    app = IrqApp(LiveSource(gw.url, gw.operator), context="test")
    async with app.run_test(size=(120, 40)) as pilot:

        async def until(predicate: Callable[[], object], what: str) -> None:
            deadline = time.monotonic() + 60
            while not predicate():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                await pilot.pause(0.1)

        await until(lambda: app.index.row(nohb_id) and app.index.row(parked_id), "both rows")
        await pilot.press("slash", *"has:warning", "enter")
        await until(lambda: app.index.query.text == "has:warning", "the filter")
        assert nohb_id in app.index.visible and parked_id not in app.index.visible
        fleet = app.screen
        await until(lambda: fleet.table.selected_id == nohb_id, "the run selected")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, RunDetailScreen), "run detail")
        section = app.screen.query_one("#sec-warnings", Static)

        def section_text() -> str:
            with open(os.devnull, "w") as sink:
                console = Console(width=200, record=True, file=sink)
                console.print(section.content)
            return console.export_text()

        await until(lambda: "no heartbeat timeout" in section_text(), "the warning in detail")
        assert "a dead worker is noticed at the step's own timeout (900s)" in section_text()


def test_a_killed_workers_run_is_never_shown_plainly_running_past_its_timeout(
    temporal_server: DevServer,
    gateway_for: Callable[..., ServedGateway],
    workers: list[ChildProcess],
    task_queue: str,
    tmp_path: Path,
) -> None:
    """Temporal's hello_cancellation (2 s heartbeat timeout, heartbeats without details),
    its worker SIGKILLed, read through a gateway that polls every 3 s: once the last beat is
    older than the timeout, the CLI never says plain ``running``, in JSON or text."""
    worker = start_plain_worker(temporal_server, task_queue, tmp_path / "w.log")
    workers.append(worker)
    wid = f"hello-{task_queue}"
    temporal_server.start_workflow(wid, "HelloCancellation", task_queue, {})
    gw = gateway_for(task_queue, rps=50, poll=3)
    env = {**gw.env(gw.operator), "IRQ_HOME": str(gw.home), "COLUMNS": "220"}
    run_id = f"temporal:local/{wid}"

    def beating() -> dict[str, Any] | None:
        run = runs_json(gw, gw.home).get(wid)
        return run if run and run["heartbeat_age_s"] is not None else None

    run = wait_for(beating, "a recorded heartbeat")
    assert run["heartbeat_timeout_s"] == 2
    # it heartbeats (without details): the warning says what is missing, not "no heartbeat"
    assert not any("has not heartbeated" in w for w in run["warnings"])
    assert any("heartbeats without irq details" in w for w in run["warnings"])
    assert any(w.startswith("application version not pinned") for w in run["warnings"])

    assert worker.popen is not None
    os.kill(worker.popen.pid, signal.SIGKILL)
    worker.popen.wait(10)

    overdue_reads = 0
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the run never became lost"
        # irq runs -o json: the fleet view (irq show would focus the run, so the adapter
        # would describe it sooner and narrow the window)
        data = runs_json(gw, gw.home)[wid]
        if data["state"] == "lost":
            break
        age, timeout = data["heartbeat_age_s"], data["heartbeat_timeout_s"]
        if data["state"] == "running" and age is not None and age > timeout:
            overdue_reads += 1
            # as of an older observation: say so, and what the age says now
            assert data["suspected_state"] == "lost", data
            assert data["state_as_of"] is not None and data["observed_age_s"] is not None
            # read again as text (later, so older still): never a plain "running"
            text = irq("show", run_id, env=env)
            state_line = next(ln for ln in text.stdout.splitlines() if ln.startswith("state"))
            said = state_line.split("(native:")[0]  # the backend's own word may stay
            assert not PLAIN_RUNNING.search(said), state_line
            listed = irq("runs", env=env)
            row = next(ln for ln in listed.stdout.splitlines() if run_id in ln)
            assert not PLAIN_RUNNING.search(row), row
        time.sleep(0.2)
    print(f"\nreads of a running state past its heartbeat timeout: {overdue_reads}")
    # the window the issue saw (running, age past the timeout, an older reading) was read
    assert overdue_reads > 0
