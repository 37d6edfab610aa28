"""Command palette (ctrl+p): every view, every action on the selection, filters, and
"open run …" for runs; mutating entries say when the role or context forbids them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher
from textual.markup import escape

from console.terminal_text import terminal_safe
from console.tui.screens.base import DECISIONS, RUN_ACTIONS, ViewScreen

if TYPE_CHECKING:
    from console.tui.app import IrqApp

MAX_RUN_HITS = 2000  # runs scanned per keystroke


@dataclass(frozen=True)
class PaletteEntry:
    text: str
    help: str
    callback: Callable[[], object]

    @property
    def shown_help(self) -> str:
        """Textual reads a hit's help as markup: ids and titles are agent text."""
        return escape(terminal_safe(self.help))


def palette_entries(app: IrqApp, screen: ViewScreen | None) -> list[PaletteEntry]:
    dash = app.glyphs.dash
    entries = [
        PaletteEntry("Go to fleet", f":runs {dash} every run", partial(app.show_view, "fleet")),
        PaletteEntry("Go to inbox", f":inbox {dash} pending interrupts",
                     partial(app.show_view, "inbox")),
        PaletteEntry("Go to audit", f":audit {dash} recent commands",
                     partial(app.show_view, "audit")),
        PaletteEntry("Go to obligations", f":obligations {dash} what the policy obliged",
                     partial(app.show_view, "obligations")),
        PaletteEntry("Go to alerts", f":alerts {dash} conditions that need a person",
                     partial(app.show_view, "alerts")),
        PaletteEntry("Go to jobs", f":jobs {dash} bulk jobs: progress, failures, cancel",
                     partial(app.show_view, "jobs")),
        PaletteEntry("Show late and lost runs", "/state:late,lost",
                     partial(app.filter_fleet, "state:late,lost")),
        PaletteEntry("Show runs waiting for a decision", "/state:waiting",
                     partial(app.filter_fleet, "state:waiting")),
        PaletteEntry("Show active runs", "/state:active",
                     partial(app.filter_fleet, "state:active")),
        PaletteEntry("Clear filter", "show every run", partial(app.filter_fleet, "")),
    ]
    allowed, why = app.may_mutate()
    suffix = "" if allowed else f" (not allowed: {why})"
    if screen is not None:
        runs = screen.selected_run_ids()
        if runs:
            for name, action in RUN_ACTIONS.items():
                entries.append(PaletteEntry(
                    f"{name.capitalize()} {runs[0]}{suffix}",
                    f":{name} {dash} plan and confirmation first",
                    partial(screen.request_action, action, runs)))
        intr = screen.selected_interrupt()
        if intr is not None:
            for name, kind in DECISIONS.items():
                if kind in intr.allowed_decisions:
                    entries.append(PaletteEntry(
                        f"{name.capitalize()} {quote(app, intr.title)}{suffix}",
                        f":{name} {intr.id}",
                        partial(screen.request_decision, kind, intr.id)))
        entries.append(PaletteEntry("Keys of this screen", "?", partial(app.show_help, screen)))
    return entries


class IrqCommands(Provider):
    """Views, actions and runs."""

    @property
    def irq(self) -> IrqApp:
        return cast("IrqApp", self.app)

    def _screen(self) -> ViewScreen | None:
        for screen in reversed(self.app.screen_stack):
            if isinstance(screen, ViewScreen):
                return screen
        return None

    async def discover(self) -> Hits:
        for entry in palette_entries(self.irq, self._screen()):
            yield DiscoveryHit(Content(terminal_safe(entry.text)), entry.callback,
                               help=entry.shown_help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for entry in palette_entries(self.irq, self._screen()):
            text = terminal_safe(entry.text)
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, _highlight(matcher, text), entry.callback, help=entry.shown_help)
        for n, run_id in enumerate(self.irq.view.runs):
            if n >= MAX_RUN_HITS:
                break
            text = f"Open run {terminal_safe(run_id)}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, _highlight(matcher, text), partial(self.irq.open_run, run_id),
                          help="run detail")


def _highlight(matcher: Matcher, text: str) -> Content:
    """``Matcher.highlight`` without its markup parsing: ``text`` holds agent text (a title
    with ``[/x]`` would raise and drop the hit)."""
    content = Content(text)
    _score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for offset in offsets:
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


def quote(app: IrqApp, title: str) -> str:
    """“title”, or "title" in ASCII mode."""
    return f'"{title}"' if app.ascii_only else f"“{title}”"
