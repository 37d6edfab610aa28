"""The alert bar and the alerts screen at 80x24, with the alerts a real gateway raised over
Temporal and Restate (their exact shape, from ``irq alerts -o json``): the bar says how many
and of which kinds, and the newest unacknowledged one in words an operator can act on — its
run's name and what went wrong, not the run named twice; the screen's table shows what each
is about and the detail after the run's name; the pane below keeps the whole detail."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from test_snapshots import DATA, screen_text, settle
from textual.widgets import DataTable
from tui_pilot import until

from console.alert_model import Alert
from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource
from console.tui.screens.alerts import about_cell
from console.tui.state_display import ASCII, UNICODE
from console.tui.widgets.alert_bar import alert_bar_text, detail_without_run, headline

AT = datetime(2026, 12, 4, 7, 27, 30, tzinfo=UTC)
INV = "restate:local/inv_1lpwaxYCQd9t0VuQJoi09RKkDTn1pYaqkI"
FLAKY = "temporal:local/nightly-sync-206d"


def raised(seconds_ago: int, **fields: object) -> Alert:
    at = AT - timedelta(seconds=seconds_ago)
    return Alert.model_validate({"id": f"al-{seconds_ago:012d}", "since": at, "raised_at": at,
                                 **fields})


GIVEN_UP = raised(
    16, kind="given_up", subject=INV, run=INV, backend="restate", context="local",
    detail=f"Orders/fulfil ({INV}): the engine stopped retrying: RuntimeError: carrier API "
    "down for order o-42 in ship", action=f"fix the cause, then irq retry {INV}")
NO_WORKERS = raised(
    5, kind="no_workers", subject="temporal:local/task-queue/billing-206d", backend="temporal",
    context="local", detail="1 running workflow on task queue 'billing-206d' and no worker "
    "polls it: nothing it waits for can run",
    action="start a worker polling task queue billing-206d")
RETRYING = raised(
    3, kind="retrying", subject=FLAKY, run=FLAKY, backend="temporal", context="local",
    attempt=42, detail=f"AlwaysFailing ({FLAKY}): step flaky_call (activity 1) at attempt 42, "
    "last error: UpstreamUnavailable: upstream 503, next attempt at 2026-12-04T07:27:47+00:00",
    action=f"look at the step's error; irq show {FLAKY}")
ALERTS = [GIVEN_UP, NO_WORKERS, RETRYING]  # oldest first, as needing_attention orders them


def test_the_bar_names_the_kinds_and_the_newest_alert_by_its_run_name_at_80_columns() -> None:
    line = alert_bar_text(ALERTS, 80)
    assert line.cell_len == 80
    assert line.plain.startswith(" ALERTS 3   given_up no_workers retrying  AlwaysFailing: step")
    assert line.plain.endswith(" [4] alerts ")
    assert FLAKY not in line.plain  # the run is not named twice


def test_the_bar_shows_the_newest_unacknowledged_alert_and_counts_repeated_kinds() -> None:
    acked = RETRYING.model_copy(update={"state": "acknowledged", "acked_by": "ann"})
    other = raised(10, kind="retrying", subject="temporal:local/x", run="temporal:local/x",
                   detail="temporal:local/x: step a at attempt 3")
    line = alert_bar_text([GIVEN_UP, other, NO_WORKERS, acked], 200).plain
    assert "1 acked" in line and "given_up no_workers retrying 2" in line
    assert "1 running workflow on task queue 'billing-206d'" in line  # not the acked one
    assert headline(other) == "x: step a at attempt 3"  # unnamed run: its native id


def recorded_app(alerts: list[Alert]) -> IrqApp:
    """The console on the recorded fleet, holding ``alerts``, its clock at the recording."""
    source = RecordedSource(json.loads(DATA.read_text()), url="recorded")
    source.view.alerts = {a.id: a for a in alerts}
    at = source.recorded_at
    return IrqApp(source, context="demo", clock=lambda: at, ping_interval=0)


async def test_bar_and_alerts_screen_at_80x24_show_what_each_alert_is_about() -> None:
    app = recorded_app(ALERTS)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "ALERTS 3" in text and "given_up no_workers retrying  AlwaysFailing: step" in text
        await pilot.press("4")
        await until(pilot, lambda: "Alerts: 3 open" in screen_text(app), "the alerts screen")
        await pilot.pause(0.2)
        table = app.screen.query_one("#alerts-table", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        # ids cut in the middle (their ends differ); a Restate invocation id says nothing of
        # the run, its name (Orders/fulfil) does
        assert [r[2] for r in rows] == ["nightl…c-206d", "billing-206d", "Orders/fulfil"]
        # the detail cell starts after the run's name, which ABOUT already shows
        assert rows[0][3].startswith("step flaky_call (activity 1) at attempt 42")
        assert rows[2][3].startswith("the engine stopped retrying: RuntimeError")
        text = screen_text(app)
        assert "billing-206d" in text and "nightly-sync-" in text
        assert "to do  look at the step's error; irq show temporal:local/nightly-sync-206d" in text


async def test_a_long_alert_list_scrolls_in_its_table_and_keeps_title_and_detail() -> None:
    """With more alerts than rows (a demo that ran for an hour), the table scrolls inside
    its own space: the title above it and the detail pane below it stay on the screen."""
    many = [raised(100 + i, kind="retrying", subject=f"temporal:local/w-{i}",
                   run=f"temporal:local/w-{i}", detail=f"w-{i}: step a at attempt {i + 2}",
                   action=f"look at the step's error; irq show temporal:local/w-{i}")
            for i in range(40)]
    app = recorded_app(many)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await until(pilot, lambda: "Alerts: 40 open" in screen_text(app), "the alerts screen")
        for _ in range(30):
            await pilot.press("down")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "Alerts: 40 open" in text
        assert "to do  look at the step's error; irq show temporal:local/w-30" in text


def test_about_leads_with_the_name_where_it_fits_else_the_name_of_an_opaque_id() -> None:
    def about(alert: Alert, width: int, g=UNICODE) -> str:
        return about_cell(alert, detail_without_run(alert)[0], width, g)

    assert about(GIVEN_UP, 80) == f"Orders/fulfil · {INV.split('/')[1]}"
    assert about(GIVEN_UP, 80, ASCII) == f"Orders/fulfil | {INV.split('/')[1]}"
    assert about(GIVEN_UP, 13) == "Orders/fulfil"  # the invocation id tells nothing
    assert about(GIVEN_UP, 10) == "Orde…ulfil"
    assert about(RETRYING, 60) == "AlwaysFailing · nightly-sync-206d"
    assert about(RETRYING, 13) == "nightl…c-206d"  # a chosen id: kept, cut in the middle
    assert about(NO_WORKERS, 13) == "billing-206d"  # no run: the subject's last part
    assert about(GIVEN_UP, 0).startswith("Orders/fulfil · inv_")  # before the layout
