"""The runs each run-walking condition source looks at, taken in one walk of the index.

At 100,000 runs every source walking the whole index cost ~80 ms each (a run's fields are
~100 MB of objects scattered over the heap: each run read is a few cache misses, whatever is
done with it) and ``stalled`` over 300 ms: 650 ms a tick, which the evaluator then spaced
out to keep under a tenth of a core, so alerts came every 6.5 s. One walk sorts the runs
into the few each source can act on; the sources themselves are unchanged (each still
judges every run it is given).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from console.leak_rule import leaked
from console.model import RunState
from console.run_record import RunFacts


@dataclass
class RunGroups:
    given_up: list[RunFacts] = field(default_factory=list)  # state given_up
    retrying: list[RunFacts] = field(default_factory=list)  # the engine reports a retry
    #: (run id, progress) of the runs that report progress (stalled's marks)
    progress: list[tuple[str, float]] = field(default_factory=list)
    #: runs holding a resource the leak rule (console/leak_rule.py) finds leaked
    leak_candidates: list[RunFacts] = field(default_factory=list)
    paused: list[RunFacts] = field(default_factory=list)  # state paused (held too long)


def group_runs(runs: Iterable[RunFacts]) -> RunGroups:
    groups = RunGroups()
    given_up, paused = RunState.GIVEN_UP, RunState.PAUSED
    add_given_up, add_retrying = groups.given_up.append, groups.retrying.append
    add_progress, add_leak = groups.progress.append, groups.leak_candidates.append
    add_paused = groups.paused.append
    for run in runs:
        state = run.state
        if state is given_up:
            add_given_up(run)
        elif state is paused:
            add_paused(run)
        if run.retrying is not None:
            add_retrying(run)
        progress = run.progress
        if progress is not None:
            add_progress((run.id, progress))
        resources = run.resources
        if resources and leaked(resources, state.value):
            add_leak(run)
    return groups
