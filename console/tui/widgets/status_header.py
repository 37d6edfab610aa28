"""The top line: context, connection state and lag, who you are, and the stale marker.

The stale marker is the one thing that must never be missed: it shows whenever the gateway
is not live or any backend is unreachable, as a word (``STALE``), not only a colour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.widgets import Static

from console.terminal_text import terminal_safe
from console.tui.state_display import UNICODE, GlyphSet, format_age, truncate_text


@dataclass
class HeaderInfo:
    context: str = ""
    url: str = ""
    connection: str = "connecting"  # connecting | live | reconnecting | unauthorized | recorded
    detail: str = ""
    attempts: int = 0
    lag_ms: float | None = None
    identity: str = ""
    role: str = ""
    read_only: bool = False
    unreachable: list[tuple[str, float | None]] = field(default_factory=list)  # key, stale s
    runs: int = 0
    pending: int = 0
    view: str = ""
    overdue: int = 0  # obligations past their deadline
    #: the gateway sheds this console's beats (it fell behind): heartbeat ages are judged as
    #: of this many seconds ago (FleetView.liveness_now); None: not shedding
    shed_s: float | None = None


CONNECTION_STYLE = {
    "live": "bold green",
    "connecting": "yellow",
    "reconnecting": "bold yellow",
    "unauthorized": "bold red",
    "recorded": "cyan",
}


def header_text(info: HeaderInfo, width: int, g: GlyphSet = UNICODE) -> Text:
    left = Text()
    left.append(" irq ", style="bold reverse")
    left.append(f" {terminal_safe(info.context or '-')}", style="bold")
    if info.view:
        left.append(f" {info.view}", style="dim")
    left.append("  ")
    state = info.connection
    symbol = g.ok if state in ("live", "recorded") else g.stale
    left.append(f"{symbol} {state}", style=CONNECTION_STYLE.get(state, ""))
    if state == "live" and info.shed_s is not None:  # says more than the lag then
        left.append(f" beats shed {format_age(info.shed_s)}", style="bold yellow")
    elif state == "live" and info.lag_ms is not None:
        left.append(f" lag {info.lag_ms:.0f}ms", style="dim")
    if state == "reconnecting" and info.attempts:
        left.append(f" #{info.attempts}", style="dim")
    stale = state not in ("live", "recorded") or bool(info.unreachable)
    if stale:
        left.append("  ")
        left.append(" STALE ", style="bold reverse red")
        if info.unreachable and state in ("live", "recorded"):
            key, age = info.unreachable[0]
            more = f" +{len(info.unreachable) - 1}" if len(info.unreachable) > 1 else ""
            since = f" {format_age(age)}" if age is not None else ""
            left.append(f" {terminal_safe(key)} unreachable{since}{more}", style="red")
        elif info.detail:  # a connection error: may quote what the server sent
            left.append(f" {terminal_safe(info.detail)}", style="red")
    right = Text()
    role = info.role or "?"
    if info.read_only:
        right.append("read-only ", style="bold yellow")
    right.append(terminal_safe(f"{info.identity or '-'}:{role}"),
                 style="bold yellow" if role == "viewer" else "")
    right.append(f"  runs {info.runs}")
    right.append("  inbox ")
    right.append(str(info.pending), style="bold magenta" if info.pending else "")
    if info.overdue:
        right.append("  overdue ")
        right.append(str(info.overdue), style="bold red")
    right.append(" ")
    room = width - right.cell_len
    if left.cell_len > room - 1:
        truncate_text(left, max(0, room - 1), g)
    pad = max(1, width - left.cell_len - right.cell_len)
    return left + Text(" " * pad) + right


class StatusHeader(Static):
    DEFAULT_CSS = """
    StatusHeader { height: 1; background: $panel; color: $foreground; }
    StatusHeader:ansi { background: ansi_default; }
    """

    def __init__(self, glyphs: GlyphSet = UNICODE, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self.info = HeaderInfo()
        self._last: Text | None = None

    def show(self, info: HeaderInfo) -> None:
        self.info = info
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        text = header_text(self.info, max(20, self.size.width), self.glyphs)
        if text != self._last:
            self._last = text
            self.update(text, layout=False)
