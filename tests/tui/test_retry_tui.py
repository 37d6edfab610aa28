"""``R`` in the console retries the selected failed run, against a real gateway (``irq
serve``) and a real DBOS worker (tests/cli/dbos_retry_agent.py, no irq code): the
confirmation shows the plan (steps kept, the step that runs again), No is the default, Yes
sends the retry, the results say applied and the new run (a DBOS fork) shows up in the fleet
and completes, while the failed original stays as it was.

One worker and one gateway for the module; each size retries the same failed run (a fork
leaves the original failed), under its own key.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from test_live_console import confirm_with_yes
from tui_pilot import SIZES, filter_list, live_state, until

from console.model import RunState
from console.processes import stop_process
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.fleet import FleetScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from tests.cli.cli_harness import ServedGateway, start_gateway, start_retry_agent

pytestmark = pytest.mark.slow

FAILED = "dbos:local/pipeline-1"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    from console.demo.launcher import dbos_backend_url

    work = tmp_path_factory.mktemp("retry-tui-work")
    (work / "fail").touch()
    db = work / "agent.db"
    agent, log = start_retry_agent(db, work)
    gateway: ServedGateway | None = None
    try:
        deadline = time.monotonic() + 60
        while "publish" not in ((work / "counts").read_text() if (work / "counts").exists()
                                else ""):
            assert agent.poll() is None, (work / "agent.log").read_text()
            assert time.monotonic() < deadline, "the pipeline did not fail"
            time.sleep(0.2)
        (work / "fail").unlink()  # fixed: the retried step succeeds
        (work / "hold").unlink(missing_ok=True)
        gateway = start_gateway(work, [dbos_backend_url(db) + "?poll=0.3"])
        yield gateway
    finally:
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


@pytest.mark.parametrize("size", SIZES)
async def test_R_on_a_failed_run_confirms_the_plan_and_brings_the_work_back(
        served: ServedGateway, size: tuple[int, int]) -> None:
    app = IrqApp(LiveSource(served.url, served.operator), context="test")
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: live_state(app, FAILED) is RunState.FAILED,
                    "the failed pipeline", 30)
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        await filter_list(pilot, "pipeline-1")
        assert fleet.table.selected_id == FAILED

        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the retry dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog) and dialog.targets == [FAILED]
        assert dialog.plan is not None
        assert dialog.plan.steps_kept == ["fetch_data", "transform"]
        assert dialog.plan.will_rerun == ["publish"]
        # Enter, Enter: the reason hands over to No, and No sends nothing
        await pilot.press("enter")
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is fleet and not app.mutation_pending,
                    "the dialog closed")
        forks_before = {r for r in app.index.rows if r != FAILED}

        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the retry dialog")
        results = await confirm_with_yes(pilot, app, "tui test: warehouse fixed")
        (result,) = results.results
        assert (result.action, result.target, result.outcome) == ("retry", FAILED, "applied")
        assert result.new_run_id and result.new_run_id not in forks_before
        await pilot.press("enter")
        new_run = result.new_run_id
        await until(pilot, lambda: live_state(app, new_run) is RunState.COMPLETED,
                    "the new run completed", 30)
        assert live_state(app, FAILED) is RunState.FAILED  # the original stays as it was
