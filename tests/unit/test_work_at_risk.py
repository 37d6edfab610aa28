"""Work at risk, pure and at fixed times: minutes since the last journaled step (else the
journal's last completed step, else the start), GPU units from a resource's ``count=N``,
money from the price table; snapshot resources kept by a pause; the wording the CLI and TUI
show; prices from the config file and ``--price``; the fleet's cost sort; the drill's
restore time."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from console.cli.results import render_plan
from console.client import FleetView
from console.config import ConfigError, parse_config, render_config
from console.drill_report import Observation, evaluate
from console.model import Action, JournalStep, Resource, Run, RunState
from console.prices import PriceTable, parse_price_flag
from console.run_facts import RunError
from console.semantics import plan
from console.tui.run_rows import RunRowIndex, SortKey
from console.tui.widgets.plan_view import plan_text
from console.work_at_risk import (
    cost_rate,
    describe,
    units_of,
    with_work_at_risk,
    work_at_risk,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PRICES = PriceTable(per_hour={"gpu": 2.5, "sandbox": 0.6})


def _run(native: str = "wf", **kw: object) -> Run:
    fields: dict[str, object] = {"updated_at": NOW, "state": RunState.RUNNING}
    fields.update(kw)
    return Run(id=f"dbos:local/{native}", backend="dbos", context="local", native_id=native,
               **fields)  # type: ignore[arg-type]


def _gpu(rid: str = "gpu-0", detail: str = "count=2 A100", **kw: object) -> Resource:
    return Resource(id=rid, kind="gpu", detail=detail, **kw)  # type: ignore[arg-type]


def test_minutes_since_the_last_step_times_gpus_held_and_their_price():
    run = _run(last_step_at=NOW - timedelta(minutes=42), started_at=NOW - timedelta(hours=3),
               resources=[_gpu()])
    risk = work_at_risk(run, NOW, PRICES)
    assert risk.minutes == 42 and risk.counted_from == "last_step"
    assert risk.gpus == 2 and risk.gpu_minutes == 84
    assert risk.cost == pytest.approx(42 / 60 * 2.5 * 2)  # 3.50
    assert risk.currency == "USD" and risk.since == NOW - timedelta(minutes=42)
    assert describe(risk) == "42 min since the last step × 2 gpu = 84 GPU-min ($3.50)"


def test_every_priced_kind_counts_money_but_only_gpus_count_gpu_minutes():
    run = _run(last_step_at=NOW - timedelta(minutes=30),
               resources=[_gpu(detail=""), Resource(id="sb", kind="sandbox"),
                          Resource(id="lock", kind="lock")])
    risk = work_at_risk(run, NOW, PRICES)
    assert risk.gpus == 1 and risk.gpu_minutes == 30
    assert risk.cost == pytest.approx(0.5 * 2.5 + 0.5 * 0.6)


def test_released_resources_hold_nothing_and_no_price_table_means_no_money():
    run = _run(last_step_at=NOW - timedelta(minutes=10),
               resources=[_gpu(state="released"), Resource(id="l", kind="lock")])
    risk = work_at_risk(run, NOW, PRICES)
    assert risk.gpus == 0 and risk.cost is None  # a lock has no price: no money to show
    bare = work_at_risk(_run(last_step_at=NOW - timedelta(minutes=10), resources=[_gpu()]), NOW)
    assert bare.cost is None and bare.currency == "" and bare.gpu_minutes == 20
    assert describe(bare) == "10 min since the last step × 2 gpu = 20 GPU-min"


def test_without_last_step_at_the_journal_then_the_start_are_the_clock():
    steps = [JournalStep(index=0, name="fetch", status="completed",
                         completed_at=NOW - timedelta(minutes=5)),
             JournalStep(index=1, name="train", status="in_flight",
                         started_at=NOW - timedelta(minutes=4))]
    run = _run(started_at=NOW - timedelta(minutes=50), resources=[_gpu(detail="")])
    assert work_at_risk(run, NOW, PRICES, steps).minutes == 5
    from_start = work_at_risk(run, NOW, PRICES)
    assert from_start.minutes == 50 and from_start.counted_from == "start"
    assert describe(from_start).startswith("50 min since the start")
    unknown = work_at_risk(_run(), NOW, PRICES)
    assert unknown.minutes == 0 and unknown.counted_from == ""


def test_an_ended_run_stops_the_clock_when_it_failed():
    run = _run(state=RunState.FAILED, last_step_at=NOW - timedelta(hours=2),
               error=RunError(type="OOM", at=NOW - timedelta(hours=2) + timedelta(minutes=7)))
    assert work_at_risk(run, NOW).minutes == 7


@pytest.mark.parametrize(("detail", "units"), [
    ("count=4", 4.0), ("A100, size: 2", 2.0), ("gpus=8 H100", 8.0), ("slice-2", 1.0), ("", 1.0),
])
def test_units_come_from_count_or_size_in_the_detail(detail: str, units: float):
    assert units_of(Resource(id="g", kind="gpu", detail=detail)) == units


def test_plans_that_throw_work_away_carry_it_and_resume_does_not():
    run = _run(last_step_at=NOW - timedelta(minutes=42), resources=[_gpu()])
    for action in (Action.CANCEL, Action.TERMINATE, Action.PAUSE):
        planned = with_work_at_risk(plan(action, [run], now=NOW), [run], NOW, PRICES)
        (risk,) = planned.work_at_risk
        assert risk.run_id == run.id and risk.cost == pytest.approx(3.5)
        assert planned.contract()["work_at_risk"][0]["gpu_minutes"] == 84
    resumed = with_work_at_risk(plan(Action.RESUME, [run], now=NOW), [run], NOW, PRICES)
    assert resumed.work_at_risk == []


def test_a_snapshot_resource_is_kept_by_a_pause_and_named_saved_and_restored():
    sandbox = Resource(id="sandbox-1", kind="sandbox", on_pause="snapshot")
    run = _run(last_step_at=NOW - timedelta(minutes=3), resources=[sandbox, _gpu()])
    paused = with_work_at_risk(plan(Action.PAUSE, [run], now=NOW), [run], NOW, PRICES)
    assert [r.id for r in paused.resources_kept] == ["sandbox-1", "gpu-0"]
    assert paused.work_at_risk[0].snapshot == ["sandbox-1"]
    text = plan_text(paused).plain
    assert "work at risk: 3.0 min since the last step × 2 gpu = 6.0 GPU-min ($0.28)" in text
    assert "sandbox-1: saved on pause, restored on resume" in text
    out = io.StringIO()
    render_plan(paused.contract(), Console(file=out, width=200, color_system=None))
    printed = out.getvalue()
    assert "work at risk: 3.0 min since the last step × 2 gpu" in printed
    assert "sandbox-1: saved on pause, restored on resume" in printed


def test_the_tui_plan_names_each_run_when_there_are_several():
    runs = [_run("a", last_step_at=NOW - timedelta(minutes=42), resources=[_gpu()]),
            _run("b", last_step_at=NOW - timedelta(minutes=1))]
    planned = with_work_at_risk(plan(Action.CANCEL, runs, now=NOW), runs, NOW, PRICES)
    text = plan_text(planned).plain
    assert "work at risk: dbos:local/a: 42 min since the last step × 2 gpu" in text
    assert "work at risk: dbos:local/b: 1.0 min since the last step" in text


def test_prices_from_the_config_file_and_the_flag():
    config = parse_config('[prices]\ngpu = 2.5\nsandbox = 1\ncurrency = "EUR"\n',
                          Path("config.toml"))
    assert config.prices.per_hour == {"gpu": 2.5, "sandbox": 1.0}
    assert config.prices.money(3.5) == "€3.50"
    assert parse_config(render_config(config), Path("c")).prices == config.prices
    assert config.prices.with_prices(dict([parse_price_flag("gpu=4")])).per_hour["gpu"] == 4.0
    with pytest.raises(ConfigError, match="gpu must be a number"):
        parse_config('[prices]\ngpu = "cheap"\n', Path("config.toml"))
    with pytest.raises(ValueError, match="KIND=PRICE_PER_HOUR"):
        parse_price_flag("2.50")
    with pytest.raises(ValueError, match=">= 0"):
        parse_price_flag("gpu=-1")
    assert PriceTable(currency="CHF").money(1234.5) == "1,234.50 CHF"


def test_the_welcome_prices_round_trip_and_an_old_gateway_sends_none():
    assert PriceTable.from_contract(PRICES.contract()) == PRICES
    assert PriceTable.from_contract(None) == PriceTable()
    assert PriceTable.from_contract({"per_hour": {"gpu": -1}}) == PriceTable()


def test_the_fleet_sorts_by_cost_held_dearest_first_then_longest_since_the_last_step():
    view = FleetView()
    view.runs = {r.id: r for r in [
        _run("cheap", resources=[Resource(id="sb", kind="sandbox")],
             last_step_at=NOW - timedelta(hours=5)),
        _run("big", resources=[_gpu(detail="count=8")], last_step_at=NOW),
        _run("old2", resources=[_gpu()], last_step_at=NOW - timedelta(hours=2)),
        _run("new2", resources=[_gpu()], last_step_at=NOW - timedelta(minutes=1)),
        _run("none"),
    ]}
    view.prices = PRICES
    index = RunRowIndex()
    index.sync(view, NOW)
    index.set_sort(SortKey.COST)
    assert [v.rsplit("/", 1)[1] for v in index.visible] == ["big", "old2", "new2", "cheap",
                                                             "none"]
    assert cost_rate(view.runs["dbos:local/big"], PRICES) == 20.0
    # without prices the GPU count orders them (the sandbox costs nothing known)
    assert cost_rate(view.runs["dbos:local/cheap"], None) == 0.0
    view.prices = PriceTable(per_hour={"sandbox": 100.0})  # new prices re-key every row
    index.sync(view, NOW, changed=[])
    assert index.visible[0] == "dbos:local/cheap"


def test_the_drill_reports_the_work_at_risk_and_the_snapshot_restore_time():
    sandbox = Resource(id="sandbox-1", kind="sandbox", on_pause="snapshot")
    run = _run(last_step_at=NOW - timedelta(minutes=42), resources=[sandbox, _gpu()])
    result = evaluate(Observation(
        run_id=run.id, backend="dbos", preempted_at=NOW, journal_before=[],
        resources_before=run.resources, recovered_at=NOW + timedelta(seconds=4),
        recovered_state="running", resources_after=run.resources,
        work_at_risk=work_at_risk(run, NOW, PRICES),
        restored_at=NOW + timedelta(seconds=5.5)))
    assert result.clean and result.restore_after_s == 1.5
    assert result.snapshot_resources == ["sandbox-1"]
    assert result.work_at_risk is not None and result.work_at_risk["gpu_minutes"] == 84
    assert "snapshot restored in 1.5s" in result.detail
    assert {"work_at_risk", "restore_after_s"} <= result.as_json().keys()
