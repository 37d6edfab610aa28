"""Marks (k9s-style): space marks the selected row, * marks exactly the rows the filter shows,
and an action applies to the marks through one plan + confirm dialog (every target listed,
default No) and ONE command, with per-item results (partial failure visible per item).

The source is the recorded demo fleet with its ``command`` captured: what the console sends
is what these tests check; the pause's answer has one failed item of three."""

from __future__ import annotations

import json

from test_snapshots import DATA, screen_text, settle
from tui_pilot import filter_list, until

from console.model import Action, CommandResult, Decision
from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource
from console.tui.marks import Marks
from console.tui.messages import FleetBatch
from console.tui.screens.fleet import FleetScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from console.tui.widgets.summary_line import SummaryLine


class CapturingSource(RecordedSource):
    """The recording, plus a log of every command the console sends; a real send answers
    applied for every target but the last, which fails."""

    def __init__(self) -> None:
        super().__init__(json.loads(DATA.read_text()), url="recorded")
        self.sent: list[tuple[str, list[str], bool]] = []

    async def command(self, action: Action | str, targets: list[str], *, reason: str = "",
                      dry_run: bool = False,
                      decision: Decision | None = None) -> list[CommandResult]:
        self.sent.append((Action(action).value, list(targets), dry_run))
        if dry_run:
            return await super().command(action, targets, reason=reason, dry_run=True)
        return [CommandResult(id="c1", action=Action(action).value, target=t,
                              outcome="failed" if i == len(targets) - 1 else "applied",
                              detail="backend refused: run is finishing"
                              if i == len(targets) - 1 else "")
                for i, t in enumerate(targets)]


def app_with_capture() -> tuple[IrqApp, CapturingSource]:
    source = CapturingSource()
    at = source.recorded_at
    return IrqApp(source, context="demo", clock=lambda: at, ping_interval=0), source


def fleet(app: IrqApp) -> FleetScreen:
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen


async def test_space_marks_and_unmarks_the_selected_row() -> None:
    app, _ = app_with_capture()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = fleet(app)
        first = screen.table.selected_id
        assert first is not None and not len(screen.marks)
        await pilot.press("space")
        assert screen.marks.ids() == [first]
        assert screen.selected_run_ids() == [first]
        assert screen.query_one(SummaryLine).marked == 1
        await pilot.pause(0.1)
        assert "1 marked" in screen_text(app)
        await pilot.press("down", "space")
        second = screen.table.selected_id
        assert second != first and screen.marks.ids() == [first, second]
        await pilot.press("space")  # again on the same row: unmarked
        assert screen.marks.ids() == [first]
        await pilot.press("escape")  # esc clears the marks
        assert not len(screen.marks)
        assert screen.selected_run_ids() == [second]
        await pilot.pause(0.1)
        assert "marked" not in screen_text(app)


async def test_asterisk_marks_exactly_the_filtered_rows_and_again_clears() -> None:
    app, _ = app_with_capture()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = fleet(app)
        await filter_list(pilot, "state:running")
        shown = list(app.index.visible)
        assert shown and len(shown) < len(app.index.rows)
        await pilot.press("asterisk")
        assert screen.marks.ids() == shown
        assert f"{len(shown)} marked" in screen_text(app)
        await pilot.press("asterisk")
        assert not len(screen.marks)


async def test_pause_with_three_marks_one_dialog_one_command_per_item_results() -> None:
    app, source = app_with_capture()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = fleet(app)
        await filter_list(pilot, "state:running")
        await pilot.press("space", "down", "space", "down", "space")
        marked = screen.marks.ids()
        assert len(marked) == 3
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.targets == marked
        assert source.sent == [("pause", marked, True)]  # the plan: one dry run, 3 targets
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "Pause 3 runs?" in text
        assert all(t[:20] in text for t in marked), text
        await pilot.click("#yes")
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "the results")
        assert source.sent[1:] == [("pause", marked, False)]  # ONE command, the 3 targets
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "backend refused: run is finishing" in text
        assert text.count("applied") >= 2, text
        assert screen.marks.ids() == [marked[2]]  # applied: unmarked; failed: still marked
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), "back on the fleet")
        assert len(source.sent) == 2


async def test_no_on_the_bulk_dialog_sends_nothing_and_keeps_the_marks() -> None:
    app, source = app_with_capture()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = fleet(app)
        await pilot.press("space", "down", "space")
        marked = screen.marks.ids()
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), "back on the fleet")
        await pilot.pause(0.2)
        assert [s for s in source.sent if not s[2]] == []
        assert source.sent == [("cancel", marked, True)]
        assert screen.marks.ids() == marked




async def test_marks_of_a_run_that_disappears_are_dropped() -> None:
    app, _ = app_with_capture()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = fleet(app)
        await pilot.press("space", "down", "space")
        gone, kept = screen.marks.ids()
        del app.view.runs[gone]  # the gateway reported the run removed
        app.post_message(FleetBatch([{"kind": "run_removed", "data": {"id": gone}}]))
        await until(pilot, lambda: gone not in app.index.rows, "the run dropped from the table")
        await pilot.pause(0.2)
        assert screen.marks.ids() == [kept]
        assert screen.query_one(SummaryLine).marked == 1


def test_marks_toggle_mark_all_and_sent() -> None:
    marks = Marks()
    assert marks.toggle("a") and "a" in marks
    assert marks.mark_all(["a", "b", "c"]) and marks.ids() == ["a", "b", "c"]
    assert not marks.mark_all(["a", "b", "c"]) and not len(marks)  # again: cleared
    assert not marks.mark_all([])
    marks.mark_all(["a", "b", "c"])
    assert marks.keep_only(["a", "c", "z"]) and marks.ids() == ["a", "c"]
    assert not marks.keep_only(["a", "c"])
    marks.sent([CommandResult(id="1", action="pause", target="a", outcome="applied"),
                CommandResult(id="1", action="pause", target="c", outcome="conflict")])
    assert marks.ids() == ["c"]
