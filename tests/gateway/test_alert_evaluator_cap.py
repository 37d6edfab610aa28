"""A mass condition is raised over several ticks, a bounded number per tick (the journal work
of one tick stays short), and none is lost or raised twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.alert_model import AlertKind, Condition
from console.gateway import alert_evaluator
from console.gateway.alert_evaluator import AlertEvaluator
from console.gateway.alert_store import AlertStore
from console.gateway.journal_engines import open_journal


def test_thousands_of_conditions_are_raised_in_bounded_ticks(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "gateway.db", owner="gw")
    store = AlertStore(journal)
    now = [datetime(2026, 12, 4, tzinfo=UTC)]
    conditions = [
        Condition(AlertKind.STALLED, f"dbos:x/run-{i}", "no progress", run=f"dbos:x/run-{i}")
        for i in range(2 * alert_evaluator.MAX_RAISES_PER_TICK + 10)
    ]
    published: list[str] = []
    evaluator = AlertEvaluator(
        store,
        [lambda: conditions],
        grace_s=0.0,
        clock=lambda: now[0],
        publish=lambda _kind, alert: published.append(alert["id"]),
    )
    per_tick = []
    for _ in range(4):
        per_tick.append(len(evaluator.tick()))
        now[0] += timedelta(seconds=1)
    cap = alert_evaluator.MAX_RAISES_PER_TICK
    assert per_tick == [cap, cap, 10, 0]
    assert len(store.active()) == len(conditions) == len(set(published))
    journal.close()
