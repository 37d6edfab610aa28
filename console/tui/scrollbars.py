"""Scrollbars drawn without block characters in ASCII mode (``IRQ_ASCII``).

Textual draws the ends of a scrollbar thumb with eighth-blocks (``▁▂▃▄▅▆▇``, ``▉▊▋▌▍▎▏``) for
smoother movement; a terminal that cannot show them draws garbage at the edge of every
scrolled view. In ASCII mode the thumb is whole cells in reverse video (spaces only). Textual
picks the renderer through the class attribute ``ScrollBar.renderer`` and renders inside the
app's context, so one renderer asks the running app which glyphs it uses (both through
``textual_internals.py``): an app that is not
in ASCII mode (and any other Textual app in the process) keeps Textual's own scrollbars.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.segment import Segments
from textual.scrollbar import ScrollBarRender

from console.tui.textual_internals import running_app, use_scrollbar_renderer


class AsciiScrollBarRender(ScrollBarRender):
    """A thumb of whole cells: no partial-block glyph at either end."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


class ModeScrollBarRender(ScrollBarRender):
    """Textual's scrollbar, or :class:`AsciiScrollBarRender`'s when the app is ASCII-only."""

    @classmethod
    def render_bar(cls, *args: Any, **kwargs: Any) -> Segments:
        if ascii_app_running():
            return AsciiScrollBarRender.render_bar(*args, **kwargs)
        return super().render_bar(*args, **kwargs)


def ascii_app_running() -> bool:
    return bool(getattr(running_app(), "ascii_only", False))


def use_mode_scrollbars() -> None:
    """Install :class:`ModeScrollBarRender` (idempotent; only ASCII-mode apps see a change)."""
    use_scrollbar_renderer(ModeScrollBarRender)
