"""SVG snapshots of every screen, rendered from a recording of the real demo fleet
(``tests/tui/data/recorded_fleet.json``, written by ``python -m tools.screenshots
--record``) with the clock frozen at the recording's time and no cursor blink.

Update after an intended change: ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from tui_pilot import until

from console.model import DecisionKind
from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource
from console.tui.screens.audit import AuditScreen
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog

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


def test_ascii_only_fleet_with_the_pause_dialog_open(snap_compare):
    """IRQ_ASCII: the fleet with a bordered dialog over it, every character ASCII (borders,
    the plan's separators, the hint line)."""
    async def pause(pilot: Any) -> None:
        await settle(pilot)
        app = pilot.app
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        fleet.table.select(first_live_run(app))
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the pause dialog")
        await pilot.pause(0.3)
        assert not not_ascii(screen_text(app)), not_ascii(screen_text(app))

    assert snap_compare(recorded_app(ascii_only=True), terminal_size=(80, 24), run_before=pause)


def screen_text(app: IrqApp) -> str:
    """Every character on the screen, as the snapshot's SVG holds them."""
    svg = app.export_screenshot()
    cells = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape("".join(cells)).replace("\xa0", " ")


def box_drawing(text: str) -> set[str]:
    """Box-drawing characters (U+2500-U+257F): what borders are made of outside ASCII mode."""
    return {c for c in text if 0x2500 <= ord(c) <= 0x257F}


def not_ascii(text: str) -> set[str]:
    return {c for c in text if not c.isascii()}


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "unicode"])
async def test_ascii_only_draws_every_screen_in_ascii(ascii_only):
    """Fleet, pause dialog, run detail, help, inbox, approve and edit dialogs, audit: with
    IRQ_ASCII every character on every screen is ASCII (borders, scrollbars, sparklines,
    arrows, separators, state symbols, ellipses); without it every one of the same screens
    draws some Unicode, so the check can see a non-ASCII character there."""
    app = recorded_app(ascii_only=ascii_only)
    found: dict[str, set[str]] = {}

    def look(name: str) -> None:
        found[name] = not_ascii(screen_text(app))

    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        look("fleet")
        fleet.table.select(first_live_run(app))
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the pause dialog")
        await pilot.pause(0.3)
        look("pause dialog")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is fleet and not app.mutation_pending, "fleet")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "run detail")
        await pilot.pause(0.3)
        look("run detail")
        await pilot.press("escape")
        for name, key, screen in (("help", "question_mark", HelpScreen),
                                  ("inbox", "2", InboxScreen), ("audit", "3", AuditScreen)):
            await pilot.press(key)
            await until(pilot, lambda s=screen: isinstance(app.screen, s), name)  # type: ignore[misc]
            await pilot.pause(0.3)
            look(name)
            if name == "help":
                await pilot.press("escape")
            if name == "inbox":
                inbox = app.screen
                assert isinstance(inbox, InboxScreen)
                for dialog, decision in (("approve dialog", "a"), ("edit dialog", "e")):
                    inbox.table.move_cursor(row=inbox._shown.index(refund_interrupt(app)))  # noqa: SLF001
                    await pilot.press(decision)
                    await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), dialog)
                    await pilot.pause(0.3)
                    look(dialog)
                    await pilot.press("escape")
                    await until(pilot, lambda i=inbox: app.screen is i  # type: ignore[misc]
                                and not app.mutation_pending, "inbox")
    assert len(found) == 8, found
    if ascii_only:
        assert found == {name: set() for name in found}, found
    else:
        assert all(found.values()), found
        assert box_drawing("".join(found["pause dialog"])), "the unicode dialog has box-drawing borders"


def test_fleet_no_color_reads_by_symbols(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(recorded_app(), terminal_size=(80, 24), run_before=settle)


def test_viewer_sees_mutations_dimmed(snap_compare):
    app = recorded_app()
    assert isinstance(app.source, RecordedSource)
    app.source._role = "viewer"  # noqa: SLF001 - the recording was made as an operator
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)
