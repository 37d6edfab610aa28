"""RunRowIndex.position: where a run is in the visible order, by bisection (no map)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from console.client import FleetView
from console.model import Run, RunState
from console.tui.run_rows import RunRowIndex, SortKey, sort_value

T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def agent(i: int, beat_age: float, progress: float, state: RunState) -> Run:
    return Run(id=f"dbos:bench/agent-{i:03d}", backend="dbos", context="bench",
               native_id=f"agent-{i:03d}", name=f"agent {i}", state=state,
               heartbeat_at=T0 - timedelta(seconds=beat_age), heartbeat_interval_s=10.0,
               heartbeat_timeout_s=60.0, progress=progress, updated_at=T0)


@settings(max_examples=40, deadline=None)
@given(sort=st.sampled_from(list(SortKey)), reverse=st.booleans(),
       query=st.sampled_from(["", "-state:paused", "agent-01"]),
       ages=st.lists(st.floats(0, 90), min_size=1, max_size=25))
def test_position_matches_the_visible_order(sort: SortKey, reverse: bool, query: str,
                                            ages: list[float]) -> None:
    view = FleetView()
    view.runs = {r.id: r for r in (
        agent(i, beat_age=age, progress=age / 90,
              state=RunState.PAUSED if i % 4 == 0 else RunState.RUNNING)
        for i, age in enumerate(ages))}
    rows = RunRowIndex()
    rows.sync(view, T0 + timedelta(seconds=5))
    rows.set_sort(sort, reverse)
    rows.set_query(query)
    for rid in view.runs:
        expected = rows.visible.index(rid) if rid in rows.visible else None
        assert rows.position(rid) == expected
    assert rows.position("dbos:bench/nothing") is None
    row = rows.rows[next(iter(view.runs))]
    assert sort_value(row, sort) == row.keys[list(SortKey).index(sort)]
