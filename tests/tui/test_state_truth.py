"""The TUI never draws a plain ``running`` for a run whose last heartbeat is already past its
timeout (pure: the fleet cell and the run detail summary, with an injected ``now``)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

from rich.console import Console

from console.model import Run, RunState
from console.semantics import unified_state
from console.tui.run_columns import COLUMNS, cell
from console.tui.run_rows import RunRow
from console.tui.run_sections import summary
from console.tui.state_display import UNICODE

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
STATE = next(c for c in COLUMNS if c.key == "state")
BEAT = next(c for c in COLUMNS if c.key == "beat")


def hello(beat_age: float, observed_age: float = 1.5) -> Run:
    """Temporal's hello_cancellation as the gateway last read it (2 s heartbeat timeout)."""
    return Run(
        id="temporal:local/hello", backend="temporal", context="local", native_id="hello",
        state=RunState.RUNNING, heartbeat_at=NOW - timedelta(seconds=beat_age),
        observed_at=NOW - timedelta(seconds=observed_age), heartbeat_interval_s=1.6,
        heartbeat_timeout_s=2.0,
    )


def drawn(run: Run) -> tuple[tuple[str, str], tuple[str, str], str]:
    state = unified_state(run, NOW)
    row = RunRow(run, state, "")
    console = Console(width=160, record=True, color_system=None, file=io.StringIO())
    console.print(summary(run, state, NOW, UNICODE))
    return (cell(row, STATE, 12, NOW, UNICODE), cell(row, BEAT, 6, NOW, UNICODE),
            console.export_text())


def test_a_reading_older_than_the_heartbeat_timeout_is_drawn_as_a_question() -> None:
    run = hello(beat_age=2.5)
    assert unified_state(run, NOW) is RunState.RUNNING  # as of the reading, 1.5 s ago
    state_cell, beat_cell, detail = drawn(run)
    assert state_cell == ("▶ running?", "bad")
    assert beat_cell[1] == "bad"
    line = next(ln for ln in detail.splitlines() if ln.startswith("state"))
    assert "running?" in line and "as of 1s ago" in line
    assert "no heartbeat for 2s, past its 2s timeout: lost?" in line


def test_a_fresh_reading_is_drawn_plainly_with_its_age() -> None:
    state_cell, beat_cell, detail = drawn(hello(beat_age=0.5, observed_age=0.2))
    assert state_cell == ("▶ running", "ok") and beat_cell[1] == "ok"
    line = next(ln for ln in detail.splitlines() if ln.startswith("state"))
    assert "running?" not in line and "as of 0s ago" in line
