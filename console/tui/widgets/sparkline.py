"""A one-line sparkline of numbers (heartbeat gaps, progress), Unicode or ASCII."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from console.tui.state_display import UNICODE, GlyphSet


def spark(values: Sequence[float], width: int, g: GlyphSet = UNICODE,
          ceiling: float | None = None) -> str:
    """The last ``width`` values scaled to the glyph ramp (0 .. ceiling or the max)."""
    if width <= 0 or not values:
        return ""
    values = list(values)[-width:]
    top = ceiling if ceiling and ceiling > 0 else max(values)
    ramp = g.spark
    if top <= 0:
        return ramp[0] * len(values)
    last = len(ramp) - 1
    return "".join(ramp[min(last, max(0, round(last * v / top)))] for v in values)


class Sparkline(Static):
    """``label ▁▂▅█▃ summary`` on one line."""

    DEFAULT_CSS = """
    Sparkline { height: 1; }
    """

    def __init__(self, label: str = "", glyphs: GlyphSet = UNICODE, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.label = label
        self.glyphs = glyphs
        self.values: list[float] = []
        self.summary = ""
        self.ceiling: float | None = None
        self.tone = "green"
        self._last: Text | None = None

    def set_values(self, values: Sequence[float], summary: str = "",
                   ceiling: float | None = None, tone: str = "green") -> None:
        self.values = list(values)
        self.summary = summary
        self.ceiling = ceiling
        self.tone = tone
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        label = f"{self.label} " if self.label else ""
        room = max(0, self.size.width - len(label) - len(self.summary) - 2)
        text = Text(label, style="bold")
        line = spark(self.values, room, self.glyphs, self.ceiling)
        text.append(line or self.glyphs.none, style=self.tone if line else "dim")
        if self.summary:
            text.append("  " + self.summary, style="dim")
        if text != self._last:
            self._last = text
            self.update(text, layout=False)
