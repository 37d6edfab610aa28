"""The runs each run-walking condition source looks at, kept as the runs change.

At 100,000 runs every source walking the whole index cost ~80 ms each (a run's fields are
~100 MB of objects scattered over the heap: each run read is a few cache misses, whatever is
done with it) and ``stalled`` over 300 ms. One walk a tick that sorted the runs into the few
each source can act on (:func:`group_runs`) brought that to ~230 ms, still a tenth of a core
at 100,000 runs for a fleet with nothing to report. :class:`LiveRunGroups` keeps the same
groups as each new version of a run is stored (the gateway's run store files it), so a tick
reads the groups, not the runs; the sources themselves are unchanged (each still judges
every run it is given).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from console.alert_sources.stalled import ProgressMarks
from console.leak_rule import leaked
from console.model import RunState
from console.run_record import RunFacts


@dataclass
class RunGroups:
    given_up: list[RunFacts] = field(default_factory=list)  # state given_up
    retrying: list[RunFacts] = field(default_factory=list)  # the engine reports a retry
    #: runs holding a resource the leak rule (console/leak_rule.py) finds leaked
    leak_candidates: list[RunFacts] = field(default_factory=list)
    paused: list[RunFacts] = field(default_factory=list)  # state paused (held too long)


_GIVEN_UP, _PAUSED = RunState.GIVEN_UP, RunState.PAUSED


def group_runs(runs: Iterable[RunFacts]) -> RunGroups:
    """The groups of ``runs``, in one walk (for a caller holding a list of runs)."""
    groups = RunGroups()
    for run in runs:
        for name in _groups_of(run):
            getattr(groups, name).append(run)
    return groups


def _groups_of(run: RunFacts) -> list[str]:
    """The names of the groups ``run`` belongs in (the one rule of both ways)."""
    names = []
    state = run.state
    if state is _GIVEN_UP:
        names.append("given_up")
    elif state is _PAUSED:
        names.append("paused")
    if run.retrying is not None:
        names.append("retrying")
    resources = run.resources
    if resources and leaked(resources, state.value):
        names.append("leak_candidates")
    return names


class LiveRunGroups:
    """The groups of an index of runs and their progress marks, kept by its owner: each new
    version of a run is :meth:`file`-d, a run leaving the index is :meth:`drop`-ped, and a
    progress changed in place is :meth:`ProgressMarks.mark`-ed. The owner changes them on
    one thread; :meth:`groups` may be read on another (each group taken in one step)."""

    def __init__(self) -> None:
        self.given_up: dict[str, RunFacts] = {}
        self.retrying: dict[str, RunFacts] = {}
        self.leak_candidates: dict[str, RunFacts] = {}
        self.paused: dict[str, RunFacts] = {}
        self.progress = ProgressMarks()
        #: run id -> the groups it is filed in (only runs filed in some group)
        self._filed: dict[str, list[str]] = {}

    def file(self, run: RunFacts, now: datetime) -> None:
        """``run`` is the index's version of its run now (its progress as of ``now``)."""
        run_id = run.id
        if run.progress is None:
            self.progress.forget(run_id)
        else:
            self.progress.mark(run_id, run.progress, now)
        before = self._filed.get(run_id)
        names = _groups_of(run)
        if before is None and not names:
            return  # the common case: in no group, and in none before
        for name in before or ():
            if name not in names:
                del getattr(self, name)[run_id]
        for name in names:
            getattr(self, name)[run_id] = run
        if names:
            self._filed[run_id] = names
        elif before is not None:
            del self._filed[run_id]

    def drop(self, run_id: str) -> None:
        self.progress.forget(run_id)
        for name in self._filed.pop(run_id, ()):
            del getattr(self, name)[run_id]

    def groups(self) -> RunGroups:
        return RunGroups(given_up=list(self.given_up.values()),
                         retrying=list(self.retrying.values()),
                         leak_candidates=list(self.leak_candidates.values()),
                         paused=list(self.paused.values()))
