"""Jobs and alert silencing in the console, against a real gateway (``irq serve``) and a real
DBOS worker (tests/cli/dbos_retry_agent.py, no irq code):

- a bulk job created by another client (the frame ``irq resume --filter pipeline --detach``
  sends, at a slow rate) shows in the job line under the header at once, with its failures (resuming a failed
  run is refused: the job records why); ``:jobs`` lists it with the reasons; ``c`` asks (No
  sends nothing), Yes cancels it through ``job_cancel`` and the line goes away;
- ``s`` on the alerts screen asks how long and why, and silences the alert through
  ``alert_silence``: the gateway records it until then (the alert is a ``liveness_unknown``
  about a Temporal address where nothing listens).

One worker and one gateway for the module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from test_live_console import confirm_with_yes
from tui_pilot import SIZES, type_text, until

from console.client import GatewayClient
from console.processes import free_port, stop_process
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.alerts import AlertsScreen
from console.tui.screens.jobs import JobsScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.job_bar import JobBar
from tests.cli.cli_harness import ServedGateway, start_gateway, start_retry_agent

pytestmark = pytest.mark.slow

PIPELINES = 4


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    from console.demo.launcher import dbos_backend_url

    work = tmp_path_factory.mktemp("jobs-tui-work")
    (work / "fail").touch()  # the pipelines fail and stay failed
    db = work / "agent.db"
    agent, log = start_retry_agent(db, work, PIPELINES)
    gateway: ServedGateway | None = None
    try:
        deadline = time.monotonic() + 60
        while ((work / "counts").read_text() if (work / "counts").exists() else "") \
                .count("publish") < PIPELINES:
            assert agent.poll() is None, (work / "agent.log").read_text()
            assert time.monotonic() < deadline, "the pipelines did not fail"
            time.sleep(0.2)
        (work / "hold").unlink(missing_ok=True)
        nobody = f"temporal+http://127.0.0.1:{free_port()}/default"  # nothing listens
        gateway = start_gateway(work, [dbos_backend_url(db) + "?poll=0.3", nobody],
                                extra_args=["--alert-grace", "0.5s"])
        yield gateway
    finally:
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


def job_line(app: IrqApp) -> str:
    bar = app.screen.query_one(JobBar)
    return bar.render().plain if bar.has_class("-shown") else ""  # type: ignore[union-attr]


@pytest.mark.parametrize("size", SIZES)
async def test_a_job_from_another_shell_shows_its_progress_and_c_cancels_it(
        served: ServedGateway, size: tuple[int, int]) -> None:
    app = IrqApp(LiveSource(served.url, served.operator), context="test")
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: sum(1 for r in app.index.rows if "pipeline-" in r)
                    == PIPELINES, "the failed pipelines", 30)
        # what ``irq resume --filter ... --detach`` sends once confirmed, from another
        # client (the CLI's filter leaves out runs resume does not apply to; the job here
        # sends it to failed runs, so each target fails with the gateway's reason)
        targets = sorted(r for r in app.index.rows if "pipeline-" in r)
        async with GatewayClient(served.url, served.operator, subscribe=False,
                                 snapshot=False) as other:
            (created,) = await other.job_command(
                "job_create", targets, reason=f"tui job {size}", job_action="resume",
                filter="pipeline", rate_per_s=0.2)
        assert created.outcome == "applied", created
        await until(pilot, lambda: "failed" in job_line(app), "a failure in the job line", 20)
        line = job_line(app)
        assert "JOBS 1" in line and f"resume 1/{PIPELINES}" in line and "1 failed" in line
        assert len(line) <= size[0]

        await pilot.press("5")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen), "the jobs screen")
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        job = jobs.selected_job()
        assert job is not None and job.state == "running" and job.targets == PIPELINES
        detail = jobs.query_one("#job-detail")
        await until(pilot, lambda: "is failed" in str(detail.render()),  # type: ignore
                    "the failure's reason", 10)

        await pilot.press("c")  # No is the default: nothing is sent
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the cancel dialog")
        await pilot.press("enter", "enter")
        await until(pilot, lambda: app.screen is jobs and not app.mutation_pending, "closed")
        assert app.job_watch.running

        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the cancel dialog")
        results = await confirm_with_yes(pilot, app, "tui test: enough")
        (result,) = results.results
        assert (result.action, result.target, result.outcome) == ("job_cancel", job.id,
                                                                   "applied")
        await pilot.press("enter")
        await until(pilot, lambda: not app.job_watch.running and job_line(app) == "",
                    "the job line gone", 10)
        assert jobs.selected_job() is not None
        assert jobs.selected_job().state == "cancelled"  # type: ignore[union-attr]


async def test_s_on_an_alert_silences_it_for_the_typed_duration(
        served: ServedGateway) -> None:
    app = IrqApp(LiveSource(served.url, served.operator), context="test")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), "the alerts screen")
        screen = app.screen
        assert isinstance(screen, AlertsScreen)
        await until(pilot, lambda: (a := screen.selected_alert()) is not None
                    and a.kind == "liveness_unknown" and a.state == "open",
                    "the liveness_unknown alert", 40)
        alert = screen.selected_alert()
        assert alert is not None

        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the silence dialog")
        await type_text(pilot, "45m")  # replaces the default 2h
        await pilot.press("enter")  # on to the reason
        results = await confirm_with_yes(pilot, app, "tui test: known outage")
        (result,) = results.results
        assert (result.action, result.target, result.outcome) == ("alert_silence", alert.id,
                                                                  "applied")
        await pilot.press("enter")
        await until(pilot, lambda: app.view.alerts[alert.id].silenced_until is not None,
                    "the silence in the view", 10)
        silenced = app.view.alerts[alert.id]
        assert silenced.silenced_until is not None
        left = silenced.silenced_until - app.clock()
        assert timedelta(minutes=40) < left <= timedelta(minutes=45)
        assert silenced.silenced_by == "ops-test"
