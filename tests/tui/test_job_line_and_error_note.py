"""The job line and the failed run's note in the fleet's summary line, as drawn text (pure
functions: console/tui/job_board.py, console/tui/widgets/summary_line.py)."""

from __future__ import annotations

from collections import Counter

import pytest
from rich.text import Text

from console.model import RunState
from console.tui.job_board import JobProgress, job_line_text, parse_jobs
from console.tui.widgets.summary_line import NOTE_HINT, summary_text

JOB = {"id": "job-3f2a9c01e4", "action": "retry", "state": "running", "targets": 1000,
       "done": 409, "failed": 3, "remaining": 588, "rate_per_s": 20.0, "filter": "state:failed",
       "created_by": "ops", "reason": "", "created_at": "2026-12-04T07:00:00+00:00"}
COUNTS = Counter({RunState.WAITING: 16, RunState.RUNNING: 8, RunState.FAILED: 1,
                  RunState.COMPLETED: 5})
NOTE = Text("✗ ConnectionError at publish_report")


@pytest.mark.parametrize("width", [80, 200])
def test_the_job_line_says_progress_and_failures_in_the_width(width: int) -> None:
    jobs = parse_jobs([JOB, "nonsense"])
    assert [j.id for j in jobs] == ["job-3f2a9c01e4"]
    line = job_line_text(jobs, width).plain
    assert "job 3f2a: retry 412/1,000 · 3 failed" in line
    assert line.endswith("[5] jobs ") and len(line) == width


def test_a_failed_run_note_fits_at_80_columns_before_the_sort_does() -> None:
    line = summary_text(COUNTS, 30, 30, "attention", False, "", 80, note=NOTE,
                        note_hint=NOTE_HINT).plain
    assert "ConnectionError at publish_report" in line and "30/30" in line
    assert "sort" not in line and len(line) == 80  # the header marks the sort too
    wide = summary_text(COUNTS, 30, 30, "attention", False, "", 200, note=NOTE,
                        note_hint=NOTE_HINT).plain
    assert "waiting 16" in wide and "(enter: detail)" in wide and "sort attention" in wide


def test_no_note_leaves_the_summary_as_it_was() -> None:
    assert summary_text(COUNTS, 30, 30, "attention", False, "", 80).plain == \
        summary_text(COUNTS, 30, 30, "attention", False, "", 80, note=None).plain


def test_a_cancelled_job_reads_as_cancelled() -> None:
    job = JobProgress.from_contract({**JOB, "state": "cancelled"})
    assert "cancelled" in job_line_text([job], 120).plain
