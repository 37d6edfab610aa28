"""The alert bar: one line under the header, shown while any alert is open (not silenced),
so an operator cannot miss it at 80x24: how many, by kind, and the newest unacknowledged one
in short (what it is about, then its detail without the run named twice); ``4`` opens the
alerts screen. Hidden when there is none (nothing else moves)."""

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


def about_label(alert: Alert) -> str:
    """What an alert is about, short: a run's native id, else the subject's last part (a task
    queue's or a deployment's name, ``BACKEND:CONTEXT`` for a whole backend)."""
    if alert.run:
        return alert.run.partition("/")[2] or alert.run
    return alert.subject.rsplit("/", 1)[-1]


def detail_without_run(alert: Alert) -> tuple[str, str]:
    """``(name, rest)``: a run condition's detail opens with ``NAME (RUN): `` or ``RUN: ``
    (alert_sources/run_subject.named); where the run is shown beside it, that opening only
    pushes the detail out of a narrow cell. ``name`` is ``""`` when there was none."""
    detail = alert.detail
    if alert.run:
        named = f" ({alert.run}): "
        at = detail.find(named)
        if at > 0:
            return detail[:at], detail[at + len(named):]
        if detail.startswith(f"{alert.run}: "):
            return "", detail[len(alert.run) + 2:]
    return "", detail


def headline(alert: Alert) -> str:
    """One alert in a few words: ``NAME: detail`` (the run's name, else what it is about)."""
    name, rest = detail_without_run(alert)
    if not alert.run:
        return rest
    return f"{name or about_label(alert)}: {rest}"


def alert_bar_text(alerts: list[Alert], width: int, key: str = "4",
                   g: GlyphSet = UNICODE) -> Text:
    open_ = [a for a in alerts if a.state == "open"]
    text = Text()
    text.append(f" ALERTS {len(alerts)} ", style="bold reverse red" if open_ else "bold reverse")
    if len(open_) != len(alerts):
        text.append(f" {len(alerts) - len(open_)} acked", style="yellow")
    kinds = Counter(a.kind for a in alerts)
    # a count only where it says something: at 80 columns every cell goes to the headline
    text.append("  " + " ".join(k if n == 1 else f"{k} {n}" for k, n in sorted(kinds.items())),
                style="bold")
    newest = (open_ or alerts)[-1]  # an acknowledged alert has someone on it already
    text.append("  " + terminal_safe(headline(newest)))
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
