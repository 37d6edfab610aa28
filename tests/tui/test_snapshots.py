"""SVG snapshots of every screen, rendered from a recording of the real demo fleet
(``tests/tui/data/recorded_fleet.json``, written by ``python -m tools.screenshots
--record``) with the clock frozen at the recording's time and no cursor blink.

Update after an intended change: ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tui_pilot import until

from console.model import DecisionKind
from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.inbox import InboxScreen

DATA = Path(__file__).parent / "data" / "recorded_fleet.json"
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def recorded_app(**kwargs: Any) -> IrqApp:
    source = RecordedSource.from_file(DATA)
    source.url = "recorded"
    at = source.recorded_at
    return IrqApp(source, context="demo", clock=lambda: at, ping_interval=0, **kwargs)


def first_live_run(app: IrqApp) -> str:
    source = app.source
    assert isinstance(source, RecordedSource)
    recorded = source.data.get("dry_runs", {}).get("pause", {})
    return next(rid for rid in app.index.visible if rid in recorded)


def refund_interrupt(app: IrqApp) -> str:
    return next(i.id for i in app.view.pending_interrupts()
                if DecisionKind.EDIT in i.allowed_decisions and i.args_schema)


async def settle(pilot: Any) -> None:
    """Wait for the recording's rows and status to be applied (a timer and a message, which a
    loaded machine can delay), then let the screen draw."""
    app = pilot.app
    await until(pilot, lambda: app.index.visible and app.status.state == "recorded",
                "the recorded fleet on screen", timeout=30)
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES)
def test_fleet_screen(snap_compare, size):
    assert snap_compare(recorded_app(), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES)
def test_fleet_screen_filtered(snap_compare, size):
    assert snap_compare(recorded_app(), terminal_size=size, run_before=settle,
                        press=["slash", *"state:running", "enter"])


@pytest.mark.parametrize("size", SIZES)
def test_inbox_screen(snap_compare, size):
    assert snap_compare(recorded_app(), terminal_size=size, run_before=settle,
                        press=["2", "_"])


@pytest.mark.parametrize("size", SIZES)
def test_run_detail_screen(snap_compare, size):
    async def open_detail(pilot: Any) -> None:
        await settle(pilot)
        app = pilot.app
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        fleet.table.select(first_live_run(app))
        await pilot.press("enter")
        await pilot.pause(0.5)

    assert snap_compare(recorded_app(), terminal_size=size, run_before=open_detail)


@pytest.mark.parametrize("size", SIZES)
def test_audit_screen(snap_compare, size):
    assert snap_compare(recorded_app(), terminal_size=size, run_before=settle,
                        press=["3", "_"])


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare, size):
    assert snap_compare(recorded_app(), terminal_size=size, run_before=settle,
                        press=["question_mark", "_"])


@pytest.mark.parametrize("size", SIZES)
def test_pause_confirmation_with_plan(snap_compare, size):
    async def pause(pilot: Any) -> None:
        await settle(pilot)
        app = pilot.app
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        fleet.table.select(first_live_run(app))
        await pilot.press("p")
        await pilot.pause(0.3)
        await pilot.press(*"GPU", "space", *"needed")

    assert snap_compare(recorded_app(), terminal_size=size, run_before=pause)


@pytest.mark.parametrize("size", SIZES)
def test_edit_dialog_with_validation_error(snap_compare, size):
    async def edit(pilot: Any) -> None:
        await settle(pilot)
        app = pilot.app
        await pilot.press("2")
        await pilot.pause(0.3)
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        inbox.table.move_cursor(row=inbox._shown.index(refund_interrupt(app)))  # noqa: SLF001
        await pilot.press("e")
        await pilot.pause(0.3)
        await pilot.press("down", "end", "left", *"99999")
        await pilot.pause(0.2)

    assert snap_compare(recorded_app(), terminal_size=size, run_before=edit)


def test_fleet_ascii_borders_and_symbols(snap_compare):
    assert snap_compare(recorded_app(ascii_only=True), terminal_size=(80, 24),
                        run_before=settle, press=["question_mark", "_"])


def test_fleet_no_color_reads_by_symbols(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(recorded_app(), terminal_size=(80, 24), run_before=settle)


def test_viewer_sees_mutations_dimmed(snap_compare):
    app = recorded_app()
    assert isinstance(app.source, RecordedSource)
    app.source._role = "viewer"  # noqa: SLF001 - the recording was made as an operator
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)
