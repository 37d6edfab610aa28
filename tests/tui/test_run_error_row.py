"""The run detail names why a failed run failed: the engine's error type, the step it failed in
and its message, drawn inert (agent text never drives the terminal)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from console.model import Run, RunState
from console.run_facts import RunError
from console.semantics import unified_state
from console.tui.run_sections import summary
from console.tui.state_display import UNICODE

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def detail(run: Run) -> list[str]:
    console = Console(width=160, record=True, color_system=None, file=io.StringIO())
    console.print(summary(run, unified_state(run, NOW), NOW, UNICODE))
    return console.export_text().splitlines()


def failed(error: RunError | None) -> Run:
    return Run(id="dbos:local/close-1", backend="dbos", context="local", native_id="close-1",
               state=RunState.FAILED, error=error)


def test_a_failed_run_shows_its_error_type_failing_step_and_message_inert() -> None:
    lines = detail(failed(RunError(type="ConnectionError", step="publish_report",
                                   message="upstream 503 from reports-api\x1b[2J", at=NOW)))
    (row,) = [ln for ln in lines if ln.startswith("error")]
    assert "ConnectionError in step publish_report: upstream 503 from reports-api" in row
    assert "\x1b" not in row and "\\x1b[2J" in row


def test_a_run_without_an_error_has_no_error_row() -> None:
    assert not [ln for ln in detail(failed(None)) if ln.startswith("error")]
