"""A run's detail draws its sections when its fetch (journal, samples, audit) comes back;
when that happens as the screen closes, its sections are already gone and there is nothing to
draw on: nothing may fail (CI once saw the fetch worker raise NoMatches while the console
shut down, which failed the run)."""

from __future__ import annotations

from pathlib import Path

from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource
from console.tui.screens.run_detail import RunDetailScreen

DATA = Path(__file__).parent / "data" / "recorded_fleet.json"


async def test_drawing_after_the_sections_are_gone_does_nothing() -> None:
    app = IrqApp(RecordedSource.from_file(DATA), context="recorded")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.open_run(next(iter(app.view.runs)))
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunDetailScreen)
        await screen.query_one("#detail").remove()  # as when the screen is taken down
        screen._draw_sections()  # noqa: SLF001 - what a late fetch calls: no NoMatches
        screen.tick()  # nor the clock's redraw
