"""``stalled``: heartbeats are fresh but the reported progress has not moved for
``after_s`` (config ``stalled_after``). The reverse stays correct: a slow call whose progress
still changes, however little, is not stalled; a run that reports no progress is not judged
(silence is liveness's business: late, lost).

:class:`ProgressMarks` remembers, per run, the progress last seen and when it last changed
(the gateway's run store keeps them as runs change); :func:`stalled` is pure over the runs,
the marks and the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from itertools import islice

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import at_text, named, run_condition
from console.model import RunState
from console.run_record import RunFacts

DEFAULT_AFTER_S = 600.0  # config ``stalled_after``


class ProgressMarks:
    """Per run: (progress, when it last changed), oldest change first.

    The gateway keeps them as its runs change (:meth:`mark` and :meth:`forget`, from the run
    store, on the event loop); the alert evaluator reads them on a worker thread
    (:meth:`unmoved_since`). A run whose progress moves goes to the end, so the runs
    unmoved longest are the first ones and a tick reads only those, not every run. The
    times must come in order (the store's clock): a change stamped earlier than the last
    one is still filed last.
    """

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float, datetime]] = {}

    def mark(self, run_id: str, progress: float, now: datetime) -> None:
        """``run_id`` reports ``progress`` at ``now``: a change of progress starts its
        clock anew (and files it last); the same progress keeps the mark it has."""
        marks = self.marks
        old = marks.get(run_id)
        if old is None:
            marks[run_id] = (progress, now)
        elif old[0] != progress:
            del marks[run_id]
            marks[run_id] = (progress, now)

    def forget(self, run_id: str) -> None:
        self.marks.pop(run_id, None)

    def note(self, runs: Iterable[RunFacts], now: datetime) -> None:
        self.note_progress(((r.id, r.progress) for r in runs if r.progress is not None), now)

    def note_progress(self, seen: Iterable[tuple[str, float]], now: datetime) -> None:
        """The marks of the runs given as ``(run id, progress)``, anew: the others are
        forgotten (for a caller that has a list of runs rather than their changes)."""
        seen = list(seen)
        kept = {run_id for run_id, _ in seen}
        for run_id in [r for r in self.marks if r not in kept]:
            del self.marks[run_id]
        for run_id, progress in seen:
            self.mark(run_id, progress, now)

    def unmoved_since(self, moved_after: datetime) -> list[tuple[str, datetime]]:
        """``(run id, since)`` of the runs whose progress has not moved since
        ``moved_after`` or earlier: a prefix of the marks, read in growing slices, each
        taken in one step (``list`` of an ``islice`` of a dict of strings and tuples runs
        in C, whole, while another thread holds the interpreter back)."""
        take = 64
        while True:
            head = list(islice(self.marks.items(), take))
            if len(head) < take or head[-1][1][1] > moved_after:
                return [(run_id, mark[1]) for run_id, mark in head if mark[1] <= moved_after]
            take *= 4


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
