"""What the fleet writes to the terminal under a heartbeat flood (issue 13, the terminal end).

A bastion link is slow: a heartbeat that changes no visible text writes nothing, a healthy
run's age is drawn as its cadence bound (``<15s``) instead of ticking every second, a changed
cell is written alone (not its line, not its widget's line), and the sorted order follows a
heartbeat by bisection instead of a full sort. State changes (late, lost, an interrupt) are
still drawn at the next flush or tick, with exact ages.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from console.client import ConnectionStatus, FleetView, GatewayError
from console.model import Run, RunState
from console.tui.app import IrqApp
from console.tui.run_columns import COLUMNS, cell
from console.tui.run_rows import RunRow, RunRowIndex, SortKey
from console.tui.screens.fleet import FleetScreen
from console.tui.state_display import UNICODE, age_bound, healthy_beat_bound
from console.tui.textual_internals import ChopsUpdate, SpanChopsUpdate
from console.tui.widgets.run_table import RunTable

T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
BEAT = next(c for c in COLUMNS if c.key == "beat")


def agent(i: int, beat_age: float = 1.0, progress: float = 0.5,
          state: RunState = RunState.RUNNING, now: datetime = T0) -> Run:
    return Run(id=f"dbos:bench/agent-{i:03d}", backend="dbos", context="bench",
               native_id=f"agent-{i:03d}", name=f"agent {i}", state=state,
               heartbeat_at=now - timedelta(seconds=beat_age), heartbeat_interval_s=10.0,
               heartbeat_timeout_s=60.0, progress=progress, updated_at=now - timedelta(hours=1))


# --------------------------------------------------------------------------- the age text


def test_age_bound_fits_four_cells_and_never_understates() -> None:
    assert [age_bound(s) for s in (1.5, 15, 99, 99.5, 150, 3600, 6000, 400_000)] == [
        "<2s", "<15s", "<99s", "<2m", "<3m", "<60m", "<2h", "<5d"]
    for seconds in (0.2, 14.9, 59.99, 99.4, 100.1, 5999, 359_999):
        assert len(age_bound(seconds)) <= 4


def test_healthy_bound_is_the_cadence_plus_its_late_margin() -> None:
    assert healthy_beat_bound(3.0, 10.0) == 15.0
    assert healthy_beat_bound(15.0, 10.0) == 15.0
    assert healthy_beat_bound(15.1, 10.0) is None  # late: shown to the second
    assert healthy_beat_bound(1.0, None) is None  # no cadence: nothing to bound by
    assert healthy_beat_bound(None, 10.0) is None


def beat_cell(run: Run, now: datetime) -> tuple[str, str]:
    from console.semantics import unified_state

    return cell(RunRow(run, unified_state(run, now), ""), BEAT, 6, now, UNICODE)


def test_a_healthy_beat_reads_the_same_from_zero_to_its_bound_then_late_to_the_second() -> None:
    texts = {beat_cell(agent(1, beat_age=age), T0) for age in (0.0, 1.0, 7.5, 9.9, 14.9)}
    assert texts == {("<15s ▁", "ok")}
    text, tone = beat_cell(agent(1, beat_age=16.0), T0)
    assert text.startswith("16s") and tone == "warn"
    text, tone = beat_cell(agent(1, beat_age=61.0), T0)
    assert text.startswith("61s") and tone == "bad"


def test_paused_and_finished_runs_keep_exact_ages() -> None:
    text, tone = beat_cell(agent(1, beat_age=7.0, state=RunState.PAUSED), T0)
    assert text.startswith("7s") and tone == "dim"


# -------------------------------------------------------------------- incremental order


changes = st.lists(st.tuples(st.integers(0, 29), st.floats(0, 90), st.floats(0, 1),
                             st.sampled_from([RunState.RUNNING, RunState.PAUSED])),
                   min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(sort=st.sampled_from(list(SortKey)), reverse=st.booleans(), query=st.sampled_from(
    ["", "state:late", "-state:paused", "agent-01"]), batches=st.lists(changes, max_size=6))
def test_incremental_order_equals_a_full_sort(sort: SortKey, reverse: bool, query: str,
                                              batches: list[list[Any]]) -> None:
    view = FleetView()
    view.runs = {r.id: r for r in (agent(i, beat_age=i) for i in range(30))}
    rows = RunRowIndex()
    rows.sync(view, T0)
    rows.set_sort(sort, reverse)
    rows.set_query(query)
    now = T0
    for batch in batches:
        now += timedelta(seconds=1)
        changed = set()
        for i, age, progress, state in batch:
            run = agent(i, beat_age=age, progress=progress, state=state, now=now)
            if i % 7 == 3 and age > 80:
                view.runs.pop(run.id, None)  # a run removed by the gateway
            else:
                view.runs[run.id] = run
            changed.add(run.id)
        rows.sync(view, now, changed)
        rows.retime(now + timedelta(seconds=20))
        fresh = RunRowIndex()
        fresh.sort, fresh.reverse = rows.sort, rows.reverse
        fresh.query = rows.query
        fresh.sync(view, now)
        for rid, row in fresh.rows.items():  # the states ``rows`` judged (retime included)
            row.state = rows.rows[rid].state
            fresh._judge(row)
        fresh.order()
        assert rows.visible == fresh.visible
        assert +rows.counts == +fresh.counts


# ------------------------------------------------------------------ partial line updates


def test_a_span_is_written_from_its_first_segment_not_from_the_start_of_the_line() -> None:
    bold = Style(bold=True)
    strip = Strip([Segment("aaaa"), Segment("bbbb", bold), Segment("cc")], 10)
    update = ChopsUpdate([{0: strip}], [(0, 5, 7)], [[10]])
    console = Console(color_system="truecolor", force_terminal=True, width=10)
    ours = SpanChopsUpdate(update).render_segments(console)
    assert ours.startswith("\x1b[1;5H")  # column 5 (1-based): where "bbbb" starts
    assert "aaaa" not in ours and "bbb" in ours and "cc" not in ours
    assert "aaaa" in update.render_segments(console)  # what Textual alone would write


# -------------------------------------------------------------------------- the app


class ScriptedSource:
    """A fleet whose events the test sends (no gateway): ``send`` applies them like a feed."""

    url = "scripted"
    role = "operator"
    identity = "test"

    def __init__(self, runs: list[Run]) -> None:
        self.view = FleetView()
        self.view.load_snapshot({"epoch": "t", "seq": 0, "interrupts": [], "backends": [],
                                 "runs": [r.contract() for r in runs]})
        self.seq = 0
        self._on_update: Any = None

    async def run(self, on_update: Any, on_status: Any) -> None:
        on_status(ConnectionStatus("live", "scripted"))
        self._on_update = on_update
        on_update(self.view, [{"kind": "snapshot", "seq": 0}])
        await asyncio.Event().wait()

    def send(self, *runs: Run) -> None:
        events = []
        for run in runs:
            self.seq += 1
            event = {"seq": self.seq, "kind": "run", "data": run.contract()}
            self.view.apply(event)
            events.append(event)
        self._on_update(self.view, events)

    def stop(self) -> None:
        pass

    async def command(self, *args: Any, **kwargs: Any) -> Any:
        raise GatewayError("scripted: no gateway", "unsupported")

    async def named_command(self, *args: Any, **kwargs: Any) -> Any:
        raise GatewayError("scripted: no gateway", "unsupported")

    async def query(self, *args: Any, **kwargs: Any) -> Any:
        raise GatewayError("scripted: no gateway", "unsupported")

    async def ping(self) -> float | None:
        return None


class Repaints:
    """The repaints the table asks Textual for (whole lines, or regions of a line)."""

    def __init__(self, table: RunTable) -> None:
        self.lines: list[int] = []
        self.regions: list[Region] = []
        self.whole = 0
        original_line, original = table.refresh_line, table.refresh

        def refresh_line(y: int) -> None:
            self.lines.append(y)
            original_line(y)

        def refresh(*regions: Region, **kwargs: Any) -> Any:
            if regions:
                self.regions.extend(regions)
            elif not kwargs:
                self.whole += 1
            return original(*regions, **kwargs)

        table.refresh_line = refresh_line  # type: ignore[method-assign]
        table.refresh = refresh  # type: ignore[method-assign]

    def clear(self) -> None:
        self.lines.clear()
        self.regions.clear()
        self.whole = 0

    @property
    def none(self) -> bool:
        return not (self.lines or self.regions or self.whole)


def line_text(table: RunTable, run_id: str) -> str:
    pos = table.index.visible.index(run_id)
    return table.render_line(pos - int(table.scroll_offset.y)).text


async def fleet_shown(app: IrqApp, pilot: Any) -> FleetScreen:
    """Flush the scripted source's first batch (the test drives flushes) until the fleet
    screen lists runs; that screen."""
    for _ in range(50):
        await pilot.pause(0.05)
        app._apply_pending()
        if app.index.visible:
            break
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen


async def test_heartbeats_of_healthy_runs_write_nothing_and_a_late_run_shows_at_once() -> None:
    clock = [T0]
    source = ScriptedSource([agent(i, beat_age=1.0 + i / 10) for i in range(40)])
    app = IrqApp(source, context="t", clock=lambda: clock[0], flush_interval=3600,
                 tick_interval=3600, ping_interval=0)  # the test drives flushes and ticks
    async with app.run_test(size=(80, 24)) as pilot:
        table = (await fleet_shown(app, pilot)).table
        await pilot.pause(0.1)
        repaints = Repaints(table)
        top = table.index.visible[2]
        number = int(top.rsplit("-", 1)[1])

        # a beat that changes no visible text (same progress, still on time): nothing
        clock[0] = T0 + timedelta(seconds=2)
        source.send(agent(number, beat_age=0.0, now=clock[0]))
        await pilot.pause(0.05)
        app._apply_pending()
        app._tick()
        assert repaints.none, (repaints.lines, repaints.regions)
        assert "<15s" in line_text(table, top)

        # a progress change: that cell alone
        source.send(agent(number, beat_age=0.0, progress=0.9, now=clock[0]))
        await pilot.pause(0.05)
        app._apply_pending()
        assert not repaints.lines and not repaints.whole
        assert len(repaints.regions) == 1 and repaints.regions[0].width <= 10
        repaints.clear()
        await pilot.pause(0.1)

        # silence past the cadence + margin: late at the next tick, the age to the second
        clock[0] = T0 + timedelta(seconds=16)
        app._tick()
        await pilot.pause(0.1)
        late = [rid for rid in table.index.visible[:5]
                if table.index.rows[rid].state is RunState.LATE]
        assert late, "runs silent past their cadence are late"
        text = line_text(table, late[0])
        assert "late" in text and "<15s" not in text
        assert app.index.counts[RunState.LATE] == 39  # all but the run that beat at +2 s
