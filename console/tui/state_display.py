"""How run states, ages and progress are drawn: symbols that read without colour.

Two glyph sets: Unicode (default) and ASCII (``--ascii`` / ``IRQ_ASCII=1``) for terminals
and fonts that mangle anything past 7 bits. Every state has a symbol *and* a word, so the
fleet reads in monochrome (``NO_COLOR``) as well as in colour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text

from console.liveness import late_margin
from console.model import RunState

#: order in which states need an operator's attention (the default sort)
ATTENTION_ORDER: tuple[RunState, ...] = (
    RunState.LOST,
    RunState.LATE,
    RunState.GIVEN_UP,
    RunState.WAITING,
    RunState.BACKING_OFF,
    RunState.PAUSING,
    RunState.CANCELLING,
    RunState.RUNNING,
    RunState.PAUSED,
    RunState.FAILED,
    RunState.TERMINATED,
    RunState.CANCELLED,
    RunState.COMPLETED,
)
ATTENTION_RANK = {state: rank for rank, state in enumerate(ATTENTION_ORDER)}

#: short words used in narrow columns (at most 10 cells)
STATE_LABEL: dict[RunState, str] = {s: s.value for s in RunState} | {
    RunState.BACKING_OFF: "backoff",
    RunState.GIVEN_UP: "given up",
}

#: the colour class of each state; styles live in the widgets' component classes
STATE_TONE: dict[RunState, str] = {
    RunState.RUNNING: "ok",
    RunState.LATE: "warn",
    RunState.LOST: "bad",
    RunState.WAITING: "ask",
    RunState.PAUSING: "calm",
    RunState.PAUSED: "calm",
    RunState.BACKING_OFF: "warn",
    RunState.CANCELLING: "calm",
    RunState.GIVEN_UP: "bad",
    RunState.COMPLETED: "done",
    RunState.FAILED: "bad",
    RunState.CANCELLED: "done",
    RunState.TERMINATED: "done",
}


@dataclass(frozen=True)
class GlyphSet:
    states: dict[RunState, str]
    bar_full: str
    bar_empty: str
    spark: str  # low .. high
    ellipsis: str
    none: str  # "no value"
    interrupt: str
    stale: str
    ok: str
    bullet: str
    arrow_up: str
    arrow_down: str
    separator: str  # between items on one line: "started 3m · attempt 2"
    dash: str  # before an explanation: "refused — role viewer"


UNICODE = GlyphSet(
    states={
        RunState.RUNNING: "▶",
        RunState.LATE: "◐",
        RunState.LOST: "○",
        RunState.WAITING: "◆",
        RunState.PAUSING: "▷",
        RunState.PAUSED: "‖",
        RunState.BACKING_OFF: "↻",
        RunState.CANCELLING: "⊗",
        RunState.GIVEN_UP: "⊠",
        RunState.COMPLETED: "✓",
        RunState.FAILED: "✗",
        RunState.CANCELLED: "⊘",
        RunState.TERMINATED: "■",
    },
    bar_full="█",
    bar_empty="░",
    spark="▁▂▃▄▅▆▇█",
    ellipsis="…",
    none="—",
    interrupt="◆",
    stale="⚠",
    ok="●",
    bullet="•",
    arrow_up="↑",
    arrow_down="↓",
    separator="·",
    dash="—",
)

ASCII = GlyphSet(
    states={
        RunState.RUNNING: ">",
        RunState.LATE: "?",
        RunState.LOST: "!",
        RunState.WAITING: "*",
        RunState.PAUSING: "-",
        RunState.PAUSED: "=",
        RunState.BACKING_OFF: "~",
        RunState.CANCELLING: "x",
        RunState.GIVEN_UP: "%",
        RunState.COMPLETED: "+",
        RunState.FAILED: "X",
        RunState.CANCELLED: "/",
        RunState.TERMINATED: "#",
    },
    bar_full="#",
    bar_empty=".",
    spark="_.-=+*#@",
    ellipsis="~",
    none="-",
    interrupt="*",
    stale="!",
    ok="o",
    bullet="*",
    arrow_up="^",
    arrow_down="v",
    separator="|",
    dash="-",
)


def glyphs(ascii_only: bool) -> GlyphSet:
    return ASCII if ascii_only else UNICODE


def format_age(seconds: float | None, none: str = "—") -> str:
    """Compact age: ``4s``, ``12m``, ``3h``, ``2d``."""
    if seconds is None:
        return none
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 120 * 60:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def age_bound(seconds: float) -> str:
    """An upper bound on an age in at most four cells: ``<15s``, ``<2m``, ``<3h``."""
    s = math.ceil(seconds)
    for unit, size in (("s", 1), ("m", 60), ("h", 3600)):
        if math.ceil(s / size) < 100:
            return f"<{math.ceil(s / size)}{unit}"
    return f"<{math.ceil(s / 86400)}d"


def healthy_beat_bound(age_s: float | None, interval_s: float | None) -> float | None:
    """The age under which a beat counts as on time (``console.liveness``: the cadence plus
    its late margin) when ``age_s`` is under it; None for a late beat or no cadence.

    The fleet shows a healthy run's heartbeat age as this bound (``<15s``) instead of the
    seconds ticking: on a bastion link, 10,000 healthy runs redrawing their age every second
    is most of what goes over the wire, and it says nothing an operator acts on. Once the
    beat is past the bound the run turns ``late`` and its age is shown to the second.
    """
    if age_s is None or not interval_s or interval_s <= 0:
        return None
    bound = interval_s + late_margin(interval_s)
    return bound if age_s <= bound else None


def progress_bar(progress: float | None, width: int, g: GlyphSet) -> str:
    """``█████░░░`` for 0..1 (values above 1 are treated as percentages)."""
    if progress is None or width <= 0:
        return ""
    frac = progress / 100.0 if progress > 1.0 else progress
    frac = min(1.0, max(0.0, frac))
    full = round(frac * width)
    return g.bar_full * full + g.bar_empty * (width - full)


def progress_percent(progress: float | None) -> str:
    if progress is None:
        return ""
    value = progress if progress > 1.0 else progress * 100.0
    return f"{value:.0f}%"


def freshness_level(age_s: float | None, interval_s: float | None, timeout_s: float | None) -> int:
    """0..7: how far a heartbeat's age has gone towards 'lost' (for the one-cell cue)."""
    if age_s is None:
        return 0
    limit = timeout_s or (5 * interval_s if interval_s else None)
    if not limit:
        return 0
    return min(7, int(7 * age_s / limit))


def truncate(text: str, width: int, ellipsis: str = "…") -> str:
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return text[:width]
    return text[: width - len(ellipsis)] + ellipsis


def truncate_text(text: Text, width: int, g: GlyphSet) -> None:
    """Cut a styled line to ``width`` cells in place, ending with the glyph set's ellipsis
    (Rich's own ``overflow="ellipsis"`` always draws ``…``)."""
    if text.cell_len <= width:
        return
    if width <= len(g.ellipsis):
        text.truncate(max(0, width), overflow="crop")
        return
    text.truncate(width - len(g.ellipsis), overflow="crop")
    text.append(g.ellipsis)


def truncate_middle(text: str, width: int, ellipsis: str = "…") -> str:
    """Keep both ends (ids differ at their ends)."""
    if len(text) <= width:
        return text
    if width <= len(ellipsis) + 2:
        return truncate(text, width, ellipsis)
    keep = width - len(ellipsis)
    head = keep // 2
    return text[:head] + ellipsis + text[len(text) - (keep - head) :]
