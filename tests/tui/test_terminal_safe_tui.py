"""The TUI writes agent and client text inert: a real DBOS agent whose every text field holds
OSC 0, OSC 52, CSI 2J, C1 controls and a bidi override (tests/support/hostile_dbos_agent.py)
is shown in the fleet table, the run detail, the inbox, the approve and pause dialogs, the
results dialog and the audit view (with a reason carrying the same payload). Each screen is
rendered to the exact text Textual would write to the terminal (the compositor's full update,
line filters included) and searched for the payload's sequences."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from textual.css.query import NoMatches
from textual.widgets import Button, Input

from console.model import RunState
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.audit import AuditScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from tests.support.hostile_dbos_agent import PAYLOAD, RUN_ID
from tests.support.hostile_fleet import HostileFleet
from tests.tui.tui_pilot import until

pytestmark = [pytest.mark.slow]

FORBIDDEN = {
    "ESC ] (OSC)": "\x1b]",
    "ESC [ 2 J": "\x1b[2J",
    "U+009B (C1 CSI)": "\x9b",
    "U+009D (C1 OSC)": "\x9d",
    "U+009C (C1 ST)": "\x9c",
    "BEL": "\x07",
    "U+202E (bidi override)": "\u202e",
}
SHOWN = "A\\x1b]0;PWNED"  # the start of the payload's visible form


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileFleet]:
    with HostileFleet(tmp_path_factory.mktemp("hostile-tui-home")) as fleet:
        yield fleet


def terminal_output(app: IrqApp) -> str:
    """What Textual writes for a full redraw of the current screen (and those under it)."""
    update = app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens
    )
    assert update is not None
    text: str = update.render_segments(app.console)  # type: ignore[attr-defined]
    return text


def assert_inert(app: IrqApp, where: str, *fields: str, verbatim: tuple[str, ...] = ()) -> None:
    """No payload sequence in what is written; each field (by its prefix) shown escaped."""
    out = terminal_output(app)
    found = [name for name, seq in FORBIDDEN.items() if seq in out]
    assert not found, f"{where}: {found} reached the terminal"
    assert "\x1b[" in out  # it is styled terminal output, not plain text
    for text in [field + SHOWN for field in fields] + list(verbatim):
        assert text in out, f"{where}: {text!r} not shown inert:\n{out!r}"


async def test_every_view_writes_agent_and_reason_text_inert(hostile: HostileFleet) -> None:
    app = IrqApp(LiveSource(hostile.url, hostile.tokens["operator"]), context="hostile")
    async with app.run_test(size=(220, 50)) as pilot:
        await until(pilot, lambda: app.index.row(RUN_ID) is not None, "the hostile run")
        await pilot.pause(0.3)
        assert_inert(app, "fleet", "wf-hostile-", "name-")

        app.open_run(RUN_ID)
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and bool(app.screen.journal), "the run's journal")
        await pilot.pause(0.2)
        assert_inert(app, "run detail", "name-", "gpu", "lock", "step-", "title-", "action-")

        app.show_view("inbox")

        def interrupt_selected() -> bool:
            screen = app.screen
            try:
                return isinstance(screen, InboxScreen) and screen.selected_interrupt() is not None
            except NoMatches:  # not composed yet
                return False

        await until(pilot, interrupt_selected, "the interrupt")
        await pilot.pause(0.2)
        assert_inert(app, "inbox", "title-", "description-")

        await pilot.press("a")  # approve: the dialog quotes title, action and arguments
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "approve dialog")
        await pilot.pause(0.2)
        assert_inert(app, "approve dialog", "title-", "action-",
                     verbatim=('"key-A\\u001b]0;PWNED',))  # arguments: JSON-escaped
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmDialog), "dialog closed")

        app.open_run(RUN_ID)
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "run detail")
        await pilot.press("p")  # pause: the plan lists the resources the agent named
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "pause dialog")
        await pilot.pause(0.2)
        assert_inert(app, "pause dialog", "wf-hostile-", "gpu-", "lock-")
        dialog: Any = app.screen
        dialog.query_one("#reason", Input).value = "reason-" + PAYLOAD  # as if pasted
        dialog.query_one("#yes", Button).press()
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "results", 60)
        await pilot.pause(0.2)
        assert_inert(app, "results dialog", "wf-hostile-")
        await pilot.press("escape")

        await until(pilot, lambda: app.index.row(RUN_ID) is not None
                    and app.index.row(RUN_ID).state in (RunState.PAUSING, RunState.PAUSED),
                    "the pause")
        app.show_view("audit")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen)
                    and any(e.reason for e in app.audit), "the audit entry")
        await pilot.pause(0.3)
        assert_inert(app, "audit", "reason-")



async def test_text_a_widget_forgot_to_make_inert_is_caught_on_its_way_out() -> None:
    """The app's line filter: a widget that puts raw agent text on screen (here a Static and
    a Markdown block fed the payload directly) still writes it inert, within its width."""
    from rich.text import Text
    from textual.widgets import Markdown, Static

    from console.tui.fleet_source import RecordedSource

    app = IrqApp(RecordedSource({}), context="recorded")
    async with app.run_test(size=(100, 20)) as pilot:
        await app.screen.mount(Static(Text("raw-" + PAYLOAD), id="forgot"),
                               Markdown("md-" + PAYLOAD, id="forgot-md"))
        await pilot.pause(0.2)
        assert_inert(app, "a widget that forgot", "raw-", "md-")
        strips = app.query_one("#forgot", Static).render_lines(
            app.query_one("#forgot", Static).region.reset_offset)
        assert all(strip.cell_length <= 100 for strip in strips)


async def test_the_command_palette_shows_agent_text_inert(hostile: HostileFleet) -> None:
    """The palette offers "Approve “<title>”" for the selected interrupt: Textual reads hit
    prompts and help as markup, so agent text there is made inert and escaped."""
    from textual.command import CommandPalette

    app = IrqApp(LiveSource(hostile.url, hostile.tokens["operator"]), context="hostile")
    async with app.run_test(size=(160, 100)) as pilot:  # tall: every discovery hit shows
        await until(pilot, lambda: app.index.row(RUN_ID) is not None, "the hostile run")
        app.show_view("inbox")

        def interrupt_selected() -> bool:
            screen = app.screen
            try:
                return isinstance(screen, InboxScreen) and screen.selected_interrupt() is not None
            except NoMatches:
                return False

        await until(pilot, interrupt_selected, "the interrupt")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await until(pilot, lambda: "“title-" in terminal_output(app), "the approve entry", 20)
        assert_inert(app, "palette (discovery)", "“title-", "Pause dbos:local/wf-hostile-")
        await pilot.press(*"approve")  # the search hits: prompt and help hold agent text
        await until(pilot, lambda: "Go to" not in (out := terminal_output(app))
                    and "“title-" in out, "the search's hits", 20)
        assert_inert(app, "palette (search)", "“title-")
