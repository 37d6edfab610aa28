"""Every use of a Textual private API in the console, in one place.

Textual is pinned exactly (``textual==8.2.8`` in ``pyproject.toml``) because of what is here.
Nothing else in ``console/`` imports from ``textual._*``, reads or writes an underscored
Textual attribute, or overrides an underscored Textual method: it calls the small functions
and bases below. ``tests/tui/test_textual_internals.py`` checks that each private name still
exists with the shape relied on, and that the installed Textual is the pinned one, so an
upgrade fails there first, by name, not in a snapshot diff.

Each item says what it buys and what the public alternative would cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, RenderableType
from textual import events
from textual._compositor import ChopsUpdate
from textual._context import active_app
from textual.app import App
from textual.screen import Screen
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget, _RenderCache
from textual.widgets import Static

from console.tui.span_update import render_spans

#: the version everything below was written against (also pinned in pyproject.toml)
PINNED_TEXTUAL = "8.2.8"

__all__ = [
    "PINNED_TEXTUAL",
    "ChopsUpdate",
    "FollowFocus",
    "SpanChopsUpdate",
    "SpanWritingApp",
    "StripCachedStatic",
    "running_app",
    "use_scrollbar_renderer",
    "write_to_terminal",
]


# ------------------------------------------------------- 1. partial line writes
#
# Private: ``textual._compositor.ChopsUpdate`` (its ``chops``, ``spans``, ``chop_ends`` and
# ``render_segments``) and the ``App._display`` hook that writes a compositor update.
#
# Buys: Textual 8.2 writes a dirty region of a line from the start of the widget that holds
# it; these write each dirty span from its first segment (``span_update.py``). With the fleet
# table's cell-level dirty regions (``widgets/run_table.py``) this took the bytes written to
# the terminal by benchmarks/tui_render.py (10,000 runs, 1,000 beats/s) from 6.8 / 31.3 KiB/s
# to 0.0 / 2.9 KiB/s at 80x24 / 200x50 (commit 4f31e72, README "Benchmarks"; measured with
# the table change, not alone: without this the table's one-cell regions are still written
# from the row's first column).
#
# Public alternative: none writes less than Textual's whole widget span. A widget per cell
# (10,000 rows x 11 columns of widgets, or per visible cell, re-laid out on every scroll)
# would cost far more CPU than the bytes it saves.


class SpanChopsUpdate(ChopsUpdate):
    """Textual's partial update, each span written from where it starts, not its widget."""

    def __init__(self, update: ChopsUpdate) -> None:
        super().__init__(update.chops, update.spans, update.chop_ends)

    def render_segments(self, console: Console) -> str:
        return render_spans(self.chops, self.spans, self.chop_ends, console)


class SpanWritingApp(App[None]):
    """An app whose partial screen updates are :class:`SpanChopsUpdate` s."""

    def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
        if type(renderable) is ChopsUpdate:  # exact type: other updates are written as is
            renderable = SpanChopsUpdate(renderable)
        super()._display(screen, renderable)


# --------------------------------------------------------- 2. the running app
#
# Private: ``textual._context.active_app`` (a ContextVar set while an app runs).
#
# Buys: the ASCII-mode scrollbars (``scrollbars.py``). ``ScrollBarRender.render_bar`` is a
# classmethod called without the scrollbar or its app, and the renderer class is shared by
# every Textual app in the process (the tests run several); the context variable is how a
# renderer learns whether the app drawing it is ASCII-only. Not a speed item: correctness on
# terminals without eighth-block glyphs (commit d11ed03).
#
# Public alternative: set ``renderer`` on each scrollbar instance of each scrollable widget of
# an ASCII-mode app when it mounts (data tables, scroll containers, text areas, dialogs...):
# every new scrollable widget must remember it, and one that does not draws blocks again.


def running_app() -> App[Any] | None:
    """The app whose context this code runs in, or None outside any app."""
    try:
        return active_app.get()
    except LookupError:
        return None


# ``ScrollBar.renderer`` itself is a documented class attribute (see its docstring); it is
# set here because the renderer installed depends on ``running_app``.


def use_scrollbar_renderer(renderer: type[ScrollBarRender]) -> None:
    """Draw every scrollbar of every app in this process with ``renderer``."""
    ScrollBar.renderer = renderer


# ------------------------------------------------------- 3. writing to the terminal
#
# Private: ``App._driver`` (its ``write`` and ``flush``).
#
# Buys: the bell, desktop notifications (OSC 9 / 777) of ``attention.py``. Textual's own
# ``App.bell`` and ``App.copy_to_clipboard`` write through ``_driver`` the same way, but
# ``App.bell`` stays silent on a headless driver (the Pilot tests' driver, whose output the
# tests read) and there is no public call for an arbitrary OSC.
#
# Public alternative: ``App.bell`` for the bell only (untestable headless), and no desktop
# notifications at all; or writing to ``sys.__stdout__`` behind Textual's back, interleaving
# with its frames mid-sequence.


def write_to_terminal(app: App[Any], data: str) -> None:
    """Write ``data`` to ``app``'s terminal now (nothing when it has none yet)."""
    driver = app._driver
    if driver is not None:
        driver.write(data)
        driver.flush()


# --------------------------------------------------------------- 4. kept strips
#
# Private: ``Widget._render_content`` (overridden), ``Widget._render``, ``_RenderCache`` and
# ``Widget._dirty_regions`` (Textual 8.2's own ``_render_content`` is reproduced around the
# one line that is new: the strips may come from a cache the subclass keeps).
#
# Buys: reopening help (``?``) reuses the strips of its 80+ lines of Rich tables instead of
# turning them into strips again (commit b5982ff). It is part of the help changes measured
# together in README "Benchmarks" (commit 502d837: ``?`` p50 79 -> 37 ms at 80x24 with the GC
# policy and the help screens kept installed, 55 -> 55 ms at 200x50; not measured alone).
#
# Public alternative: the Line API (overriding ``render_line`` to serve the kept strips, with
# ``visualize(self, self.render())`` for ``_render``) looks possible at about the same size,
# but re-implements ``Widget.render_line``'s blank and out-of-range handling and was not
# measured; without any reuse, each ``?`` turns the help text into strips again.


class StripCachedStatic(Static):
    """A Static whose rendered strips may come from :meth:`reuse_strips`."""

    def reuse_strips(self, key: tuple[Any, ...], make: Callable[[], list[Strip]]
                     ) -> list[Strip]:
        """The strips for ``key`` (width, height, visual style): ``make()`` unless kept."""
        return make()

    def _render_content(self) -> None:
        width, height = self.size
        style = self.visual_style
        strips = self.reuse_strips(
            (width, height, style),
            lambda: Visual.to_strips(self, self._render(), width, height, style))
        self._render_cache = _RenderCache(self.size, strips)
        self._dirty_regions.clear()


# ---------------------------------------------------------- 5. keys typed ahead
#
# Private: ``Widget._on_key`` (overridden: Textual's handler that runs the key's bindings
# and ``key_*`` methods on the widget the key was queued on).
#
# Buys: over SSH the keys after ``/`` or ``:`` often arrive in the same packet as it; Textual
# queues each key on the widget that had focus when it arrived, so they sit in the table's
# queue while ``/`` moves focus to the command bar, and would be lost (or run as actions on
# the selected row). Correctness, not speed (commit 7feb610; tests/tui/test_keys.py).
#
# Public alternative: probably free. Textual looks for ``_on_key`` or ``on_key`` per class of
# the MRO, subclass first, and ``prevent_default()`` stops the walk, so a public ``on_key``
# here would run before ``Widget._on_key`` and could stop it the same way. Not switched in
# this move (it is meant to change no behaviour): today the key is dispatched twice when the
# table itself has focus (here via ``super()._on_key`` and again by Textual at ``Widget``),
# harmless because the table has no ``key_*`` methods; the switch should drop that too.


class FollowFocus(Widget):
    """A widget that hands keys queued on it to whatever has focus now."""

    async def _on_key(self, event: events.Key) -> None:
        focused = self.screen.focused if self.is_attached else None
        if focused is not None and focused is not self:
            event.stop()
            event.prevent_default()
            focused.post_message(events.Key(event.key, event.character))
            return
        await super()._on_key(event)
