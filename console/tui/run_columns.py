"""Columns of the fleet table: which fit at a given width, and what each cell says.

Pure (no Textual): the widget asks for a layout once per resize and for cell text per
visible row. Columns are dropped lowest-priority first until the rest fit; the RUN column
takes what is left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from rich.cells import cell_len, set_cell_size

from console.leak_rule import leaked
from console.model import Run, RunState
from console.tui.run_rows import RunRow
from console.tui.state_display import (
    STATE_LABEL,
    STATE_TONE,
    GlyphSet,
    age_bound,
    format_age,
    freshness_level,
    healthy_beat_bound,
    progress_bar,
    progress_percent,
    truncate,
    truncate_middle,
)


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    priority: int  # 0 = never dropped; higher numbers go first
    flex: bool = False
    right: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("state", "STATE", 12, 0),
    Column("run", "RUN", 18, 0, flex=True),
    Column("beat", "BEAT", 6, 0, right=True),
    Column("progress", "PROG", 4, 1, right=True),
    Column("intr", "INTR", 4, 1),
    Column("res", "RES", 4, 2),
    Column("backend", "BACKEND", 10, 2),  # widened to 14 when there is room
    Column("name", "NAME", 18, 4),
    Column("step", "STEP", 16, 5),
    Column("updated", "UPDATED", 7, 6, right=True),
)

GUTTER = 1  # the cursor marker column
SEP = 1


@dataclass(frozen=True)
class Layout:
    columns: tuple[tuple[Column, int], ...]  # column, width
    width: int
    progress_bar: int  # cells of bar drawn before the percentage (0: percentage only)


def layout(width: int) -> Layout:
    """Columns that fit in ``width`` cells."""
    chosen = list(COLUMNS)

    def fixed(cols: list[Column]) -> int:
        return GUTTER + sum(c.width for c in cols) + SEP * (len(cols) - 1)

    while fixed(chosen) > width and any(c.priority for c in chosen):
        worst = max(chosen, key=lambda c: (c.priority, COLUMNS.index(c)))
        chosen.remove(worst)
    spare = max(0, width - fixed(chosen))
    bar = 0
    if spare >= 40 and any(c.key == "progress" for c in chosen):
        bar = 8
        spare -= bar + 1
    grow = {c.key: 0 for c in chosen}
    for key, most in (("backend", 4), ("run", 16), ("name", 14), ("step", 14), ("run", 10**6)):
        if key in grow and spare > 0:
            extra = min(spare, most)
            grow[key] += extra
            spare -= extra
    widths: list[tuple[Column, int]] = []
    for col in chosen:
        w = col.width + grow[col.key]
        if col.key == "progress" and bar:
            w += bar + 1
        widths.append((col, w))
    return Layout(tuple(widths), width, bar)


_NAME_WORD = re.compile(r"[A-Za-z0-9]+")


def run_label(run: Run, g: GlyphSet) -> str:
    """What the RUN column shows: the native id, led by the run's name when the id does not
    already say what the run is (a LangGraph thread's UUID, a Restate ``inv_…`` id): at 80
    columns there is no NAME column, and a screen of bare UUIDs tells the operator nothing."""
    return name_led(run.name, run.native_id, g.separator)


def name_led(name: str, native_id: str, separator: str) -> str:
    """``native_id``, led by ``name`` unless the id already holds the name's first word (the
    RUN column, the inbox's, the alerts' ABOUT)."""
    first = _NAME_WORD.search(name)
    if first is None or first.group().lower() in native_id.lower():
        return native_id
    return f"{name} {separator} {native_id}"


def cell(
    row: RunRow, col: Column, width: int, now: datetime, g: GlyphSet, bar: int = 0,
    *, alerted: bool = False,
) -> tuple[str, str]:
    """(text, tone) of one cell; tone names a style ('' = plain, 'dim', or a state tone).
    ``alerted``: an open alert is about the run (its state gets the alert glyph)."""
    run = row.run
    key = col.key
    if key == "state":
        text = f"{g.states[row.state]} {STATE_LABEL[row.state]}"
        flag = g.stale if alerted else ""
        suspected = run.suspected_state(now, row.state)
        if suspected is not None:
            # read as running, but the heartbeat is now past its limit: not known to run
            return text + "?" + flag, STATE_TONE[suspected]
        if run.preempted and row.state is not RunState.RUNNING:
            text += "*"
        if alerted:  # stalled, retrying...: the state alone reads as fine
            return text + flag, "warn" if STATE_TONE[row.state] in ("ok", "done", "dim") \
                else STATE_TONE[row.state]
        return text, STATE_TONE[row.state]
    if key == "run":
        return truncate_middle(run_label(run, g), width, g.ellipsis), ""
    if key == "beat":
        age = run.heartbeat_age_s(now)
        if age is None:
            return g.none, "dim"
        shown = run.suspected_state(now, row.state) or row.state
        if shown in (RunState.RUNNING, RunState.WAITING):
            bound = healthy_beat_bound(age, run.heartbeat_interval_s)
            if bound is not None:  # on time: the bound, not the seconds (no redraw per tick)
                return f"{age_bound(bound)} {g.spark[0]}", "ok"
        level = freshness_level(age, run.heartbeat_interval_s, run.heartbeat_timeout_s)
        tone = "ok"
        if shown is RunState.LATE:
            tone = "warn"
        elif shown is RunState.LOST:
            tone = "bad"
        elif run.state.terminal or row.state in (RunState.PAUSED, RunState.CANCELLED):
            tone = "dim"
        return f"{format_age(age)} {g.spark[level]}", tone
    if key == "progress":
        pct = progress_percent(run.progress)
        if not pct:
            return "", "dim"
        if bar:
            return f"{progress_bar(run.progress, bar, g)} {pct:>4}", ""
        return pct, ""
    if key == "intr":
        n = len(run.interrupts)
        return (f"{g.interrupt}{n}", "ask") if n else ("", "")
    if key == "res":
        held = [r for r in run.resources if r.state != "released"]
        leak = bool(leaked(run.resources, run.state.value))
        if not run.resources:
            return "", ""
        text = f"{len(held)}/{len(run.resources)}"
        return (text + "!", "bad") if leak else (text, "")
    if key == "backend":
        return truncate(f"{run.backend}:{run.context}", width, g.ellipsis), "dim"
    if key == "name":
        return truncate(run.name, width, g.ellipsis), ""
    if key == "step":
        if not run.in_flight_step and run.error is not None and run.error.step \
                and row.state in (RunState.FAILED, RunState.GIVEN_UP):
            # where it failed: what the retry starts from
            return truncate(f"{g.stale} {run.error.step}", width, g.ellipsis), "bad"
        return truncate(run.in_flight_step or "", width, g.ellipsis), "dim"
    if key == "updated":
        return format_age((now - run.updated_at).total_seconds()), "dim"
    return "", ""


def pad(text: str, width: int, right: bool = False) -> str:
    """Exactly ``width`` cells (wide characters counted as two)."""
    if right and cell_len(text) < width:
        return " " * (width - cell_len(text)) + text
    return set_cell_size(text, width)
