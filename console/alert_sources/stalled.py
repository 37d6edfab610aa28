"""``stalled``: heartbeats are fresh but the reported progress has not moved for
``after_s`` (config ``stalled_after``). The reverse stays correct: a slow call whose progress
still changes, however little, is not stalled; a run that reports no progress is not judged
(silence is liveness's business: late, lost).

:class:`ProgressMarks` remembers, per run, the progress last seen and when it last changed;
:func:`stalled` is pure over the runs, the marks and the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import at_text, named, run_condition
from console.model import RunState
from console.run_record import RunFacts

DEFAULT_AFTER_S = 600.0  # config ``stalled_after``


class ProgressMarks:
    """Per run: (progress, when it last changed). Runs no longer listed are forgotten."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float, datetime]] = {}

    def note(self, runs: Iterable[RunFacts], now: datetime) -> None:
        self.note_progress(((r.id, r.progress) for r in runs if r.progress is not None), now)

    def note_progress(self, seen: Iterable[tuple[str, float]], now: datetime) -> None:
        """The marks of the runs given as ``(run id, progress)``, anew: the others are
        forgotten (100,000 runs: one dict built, where a set of the runs seen and its
        difference with the marks cost three times that)."""
        old, marks = self.marks, {}
        for run_id, progress in seen:
            mark = old.get(run_id)
            marks[run_id] = mark if mark is not None and mark[0] == progress else (progress, now)
        self.marks = marks

    def unmoved_since(self, moved_after: datetime) -> list[tuple[str, datetime]]:
        """``(run id, since)`` of the runs whose progress has not moved since
        ``moved_after`` or earlier."""
        return [(run_id, mark[1]) for run_id, mark in self.marks.items()
                if mark[1] <= moved_after]


def beating(run: RunFacts, now: datetime) -> bool:
    """Fresh heartbeats: a running run whose last beat is within its timeout."""
    if run.state is not RunState.RUNNING or run.heartbeat_at is None:
        return False
    if run.heartbeat_timeout_s is None:
        return True
    return (now - run.heartbeat_at).total_seconds() <= run.heartbeat_timeout_s


def stalled(runs: Iterable[RunFacts] | Mapping[str, RunFacts], marks: ProgressMarks,
            now: datetime, *, after_s: float = DEFAULT_AFTER_S) -> list[Condition]:
    """The runs among ``runs`` (a mapping by id, or a list) whose progress has not moved
    for ``after_s`` by ``marks`` while their beats are fresh. The marks pick the candidates
    (a walk of compact tuples, not of 100,000 runs); only those are read."""
    by_id = runs if isinstance(runs, Mapping) else {r.id: r for r in runs}
    out = []
    for run_id, since in marks.unmoved_since(now - timedelta(seconds=after_s)):
        run = by_id.get(run_id)
        if run is None or run.progress is None or not beating(run, now):
            continue
        step = f" in {run.in_flight_step}" if run.in_flight_step else ""
        out.append(run_condition(
            AlertKind.STALLED, run,
            f"{named(run)}: heartbeats fresh, progress stuck at {run.progress:g}{step} since "
            f"{at_text(since)}",
            f"look at what the step waits for; irq show {run.id} (pause or cancel if stuck)",
            since=since, facts={"progress": run.progress}))
    return sorted(out, key=lambda c: c.subject)
