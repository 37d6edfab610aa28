"""The alert bar: one line under the header, shown while any alert is open (not silenced),
so an operator cannot miss it at 80x24: how many, by kind, and the newest one's detail; ``4``
opens the alerts screen. Hidden when there is none (nothing else moves)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from rich.text import Text
from textual.widgets import Static

from console.alert_model import Alert
from console.terminal_text import terminal_safe
from console.tui.state_display import UNICODE, GlyphSet, truncate_text


def needing_attention(alerts: Iterable[Alert], now: datetime) -> list[Alert]:
    """Open or acknowledged, not silenced: oldest first."""
    return sorted((a for a in alerts if a.state != "cleared" and not a.silenced(now)),
                  key=lambda a: a.raised_at)


def alert_bar_text(alerts: list[Alert], width: int, key: str = "4",
                   g: GlyphSet = UNICODE) -> Text:
    open_ = [a for a in alerts if a.state == "open"]
    text = Text()
    text.append(f" ALERTS {len(alerts)} ", style="bold reverse red" if open_ else "bold reverse")
    if len(open_) != len(alerts):
        text.append(f" {len(alerts) - len(open_)} acked", style="yellow")
    kinds = Counter(a.kind for a in alerts)
    text.append("  " + " ".join(f"{k} {n}" for k, n in sorted(kinds.items())), style="bold")
    newest = alerts[-1]
    text.append("  " + terminal_safe(newest.detail))
    hint = Text(f" [{key}] alerts ", style="dim")
    if text.cell_len > width - hint.cell_len:
        truncate_text(text, max(0, width - hint.cell_len), g)
    pad = max(0, width - text.cell_len - hint.cell_len)
    return text + Text(" " * pad) + hint


class AlertBar(Static):
    DEFAULT_CSS = """
    AlertBar { height: 1; background: $error 20%; display: none; }
    AlertBar.-shown { display: block; }
    AlertBar:ansi { background: ansi_default; }
    """

    def __init__(self, glyphs: GlyphSet = UNICODE, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self.alerts: list[Alert] = []

    def show(self, alerts: list[Alert]) -> None:
        self.alerts = alerts
        self.set_class(bool(alerts), "-shown")
        if alerts:
            self.update(alert_bar_text(alerts, max(20, self.size.width), g=self.glyphs),
                        layout=False)

    def on_resize(self) -> None:
        self.show(self.alerts)
