"""``stalled``: heartbeats are fresh but the reported progress has not moved for
``after_s`` (config ``stalled_after``). The reverse stays correct: a slow call whose progress
still changes, however little, is not stalled; a run that reports no progress is not judged
(silence is liveness's business: late, lost).

:class:`ProgressMarks` remembers, per run, the progress last seen and when it last changed;
:func:`stalled` is pure over the runs, the marks and the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import at_text, named, run_condition
from console.model import Run, RunState

DEFAULT_AFTER_S = 600.0  # config ``stalled_after``


class ProgressMarks:
    """Per run: (progress, when it last changed). Runs no longer listed are forgotten."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float, datetime]] = {}

    def note(self, runs: Iterable[Run], now: datetime) -> None:
        seen: set[str] = set()
        for run in runs:
            if run.progress is None:
                continue
            seen.add(run.id)
            mark = self.marks.get(run.id)
            if mark is None or mark[0] != run.progress:
                self.marks[run.id] = (run.progress, now)
        for gone in self.marks.keys() - seen:
            del self.marks[gone]

    def unchanged_since(self, run_id: str) -> datetime | None:
        mark = self.marks.get(run_id)
        return mark[1] if mark is not None else None


def beating(run: Run, now: datetime) -> bool:
    """Fresh heartbeats: a running run whose last beat is within its timeout."""
    if run.state is not RunState.RUNNING or run.heartbeat_at is None:
        return False
    if run.heartbeat_timeout_s is None:
        return True
    return (now - run.heartbeat_at).total_seconds() <= run.heartbeat_timeout_s


def stalled(runs: Iterable[Run], marks: ProgressMarks, now: datetime, *,
            after_s: float = DEFAULT_AFTER_S) -> list[Condition]:
    out = []
    # the progress mark first: it rules out almost every run with one dict lookup and one
    # comparison, where ``beating`` costs datetime arithmetic (at 10,000 runs this walk runs
    # every evaluator tick, on the event loop: benchmarks/alerts.py)
    moved_after = now - timedelta(seconds=after_s)
    for run in runs:
        since = marks.unchanged_since(run.id)
        if since is None or since > moved_after or run.progress is None:
            continue
        if not beating(run, now):
            continue
        step = f" in {run.in_flight_step}" if run.in_flight_step else ""
        out.append(run_condition(
            AlertKind.STALLED, run,
            f"{named(run)}: heartbeats fresh, progress stuck at {run.progress:g}{step} since "
            f"{at_text(since)}",
            f"look at what the step waits for; irq show {run.id} (pause or cancel if stuck)",
            since=since, facts={"progress": run.progress}))
    return out
