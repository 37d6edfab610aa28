"""The TUI shows the work at risk the gateway's plan carries (the cancel confirmation says
"work at risk: N min since the start × 1 gpu = … GPU-min ($…)"), and ``:sort cost`` puts
the runs holding the dearest resources first at the gateway's prices.

The source is the recorded demo fleet, answering dry runs the way the gateway does: the
semantics' plan with the work at risk folded in (console/work_at_risk.with_work_at_risk) at
the prices a gateway sends in its welcome."""

from __future__ import annotations

import json

from test_snapshots import DATA, screen_text, settle
from tui_pilot import filter_list, until

from console.model import Action, CommandResult, Decision
from console.prices import PriceTable
from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource
from console.tui.run_rows import SortKey
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.work_at_risk import with_work_at_risk

RUN = "dbos:local/fine-tune-02-0001"  # running, holds one H100 slice and a dataset lock


class PricedSource(RecordedSource):
    def __init__(self) -> None:
        super().__init__(json.loads(DATA.read_text()), url="recorded")
        self.view.prices = PriceTable(per_hour={"gpu": 2.5})  # as a welcome sets them

    async def command(self, action: Action | str, targets: list[str], *, reason: str = "",
                      dry_run: bool = False,
                      decision: Decision | None = None) -> list[CommandResult]:
        results = await super().command(action, targets, reason=reason, dry_run=dry_run)
        runs = [self.view.runs[t] for t in targets if t in self.view.runs]
        for result in results:
            if result.plan is not None:
                with_work_at_risk(result.plan, runs, self.recorded_at, self.view.prices)
        return results


async def test_the_cancel_confirmation_shows_the_work_at_risk_in_gpu_minutes_and_money():
    source = PricedSource()
    at = source.recorded_at
    app = IrqApp(source, context="demo", clock=lambda: at, ping_interval=0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await filter_list(pilot, "fine-tune-02-0001")
        await until(pilot, lambda: app.index.visible == [RUN], "the one run shown")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "work at risk:" in text
        assert "since the start × 1 gpu =" in text and "GPU-min ($" in text
        await pilot.press("escape")


async def test_sort_cost_puts_the_runs_holding_gpus_first():
    source = PricedSource()
    at = source.recorded_at
    app = IrqApp(source, context="demo", clock=lambda: at, ping_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("colon")
        for key in "sort cost":
            await pilot.press("space" if key == " " else key)
        await pilot.press("enter")
        await until(pilot, lambda: app.index.sort is SortKey.COST, "the cost sort")
        first = app.view.runs[app.index.visible[0]]
        assert any(r.kind == "gpu" and r.state != "released" for r in first.resources)
        await pilot.pause(0.2)
        assert "sort cost" in screen_text(app)
