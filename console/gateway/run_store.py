"""The gateway's index of runs: each run as its adapter reported it merged with its agent's
latest beat, its pending interrupts and any release check.

Adapters' polls (:meth:`RunStore.observe`) and the agents' beats (agent_beats.py, merged at
each coalescing :meth:`RunStore.flush`) feed it; each new version of a run is published to
the event log and filed in the liveness wheel. A beat that changes nothing but the run's
heartbeat time and progress takes a fast path (the run changed in place, a beat event); one
that changes its cadence or state the next (a copy, without a full merge).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, NamedTuple

from console.alert_sources.run_groups import LiveRunGroups
from console.gateway.agent_beats import AgentBeats
from console.gateway.event_log import EventLog
from console.gateway.interrupt_store import InterruptStore
from console.gateway.liveness_clock import LivenessWheel, fresh_due
from console.gateway.release_checks import ReleaseChecks
from console.gateway.run_contracts import ContractCache, copy_run
from console.gateway.shared_values import shared_empty
from console.model import Resource, Run, RunState
from console.run_record import FIELDS, RunFacts, RunRecord
from console.semantics import recoverability_warnings, unified_state

FINISHED_RUN_TTL = timedelta(hours=1)  # finished runs leave the live index (audit keeps them)
_RUNNING, _WAITING = RunState.RUNNING, RunState.WAITING  # read per beat: a global is faster


class AdapterView(NamedTuple):
    """What the store keeps of a run as its adapter last reported it: the fields the merge
    with the agent's beats overrides (the rest lives once, in the merged run)."""

    state: RunState
    heartbeat_at: datetime | None
    heartbeat_interval_s: float | None
    heartbeat_timeout_s: float | None
    progress: float | None
    resources: list[Resource]
    in_flight_step: str | None
    warnings: list[str]
    updated_at: datetime
    #: the run's id, the string the index's dicts are keyed by (agent_beats.py files a
    #: run's first beat under it, not under the beat's own copy of it)
    id: str

    @staticmethod
    def of(run: Run) -> AdapterView:
        return AdapterView(run.state, run.heartbeat_at, run.heartbeat_interval_s,
                           run.heartbeat_timeout_s, run.progress, shared_empty(run.resources),
                           run.in_flight_step, shared_empty(run.warnings), run.updated_at,
                           run.id)


#: fields of a merged run that do not come from the adapter as they are
MERGED_FIELDS = frozenset({*AdapterView._fields, "interrupts"}) - {"id"}


class RunStore:
    def __init__(self, events: EventLog, beats: AgentBeats, releases: ReleaseChecks,
                 interrupts: InterruptStore, wheel: LivenessWheel, *,
                 observed: dict[str, AdapterView], clock: Callable[[], datetime]) -> None:
        self.events = events
        self.beats = beats
        self.releases = releases
        self.interrupts = interrupts
        self.wheel = wheel
        #: as the adapter last reported it (shared with ``beats``: which runs are known)
        self.observed = observed
        #: the merged view (adapter + agent heartbeats), as records (run_record.py)
        self.runs: dict[str, RunRecord] = {}
        self.contracts = ContractCache(self.runs, clock=clock)
        #: one bound method for every event (each event keeps its renderer: a bound method
        #: made per event was 64 bytes of each of the log's 100,000 events)
        self._render = self.contracts.render
        self._terminal: set[str] = set()  # runs in a terminal state (for the TTL)
        #: the runs each alert source looks at, and their progress marks, kept as runs
        #: change (console/alert_sources/run_groups.py; the evaluator reads them)
        self.groups = LiveRunGroups()
        self._warning_lists: dict[tuple[str, ...], list[str]] = {}  # see warnings

    # ---------------------------------------------------------------- fed by adapters

    def observe(self, runs: Iterable[Run], gone: list[str] | None, now: datetime) -> None:
        for run in runs:
            before = self.observed.get(run.id)
            view = self.observed[run.id] = AdapterView.of(run)
            if run.id in self.beats.unknown:
                self.beats.adopt(run.id)
            elif before is not None and before == view and self._same_rest(run):
                continue  # the adapter reports it unchanged; liveness has its own wheel
            self.refresh(run.id, now, base=run)
            merged = self.runs.get(run.id)
            if before is None and merged is not None and run.id not in self.contracts.static:
                # a run new to the index: its contract's rest is encoded now, at the poll,
                # not in the first snapshot after it (100,000 at once: seconds of the loop
                # while agents beat)
                self.contracts.encode_static(merged, now)
        for run_id in gone or []:
            self.forget(run_id)

    def _same_rest(self, run: Run) -> bool:
        """Does the merged run hold ``run``'s fields that the merge does not override?"""
        merged = self.runs.get(run.id)
        if merged is None:
            return False
        return all(getattr(merged, k) == v for k, v in run.__dict__.items()
                   if k not in MERGED_FIELDS)

    def forget(self, run_id: str) -> None:
        self.observed.pop(run_id, None)
        self.beats.forget(run_id)
        self.releases.checks.pop(run_id, None)
        self.wheel.unschedule(run_id)
        self._terminal.discard(run_id)
        self.groups.drop(run_id)
        self.contracts.drop(run_id)
        if self.runs.pop(run_id, None) is not None:
            self.events.publish("run_removed", {"id": run_id})

    def expire_finished(self, now: datetime) -> None:
        """Runs finished long enough ago leave the live index (the audit keeps them)."""
        for run_id in [r for r in self._terminal if r in self.runs
                       and now - self.runs[r].updated_at > FINISHED_RUN_TTL]:
            self.forget(run_id)

    # ------------------------------------------------------------------ new versions

    def install(self, run: RunRecord, now: datetime, old: RunRecord | None = None) -> None:
        """A new merged version of a run, as of ``now``: stored, filed in the liveness wheel
        and the alert sources' groups, and counted as terminal or not. ``old``: the version
        it replaces, when the two differ in CONTRACT_DYNAMIC fields at most: the cached
        contract stays (only the beat fast path changes a run object in place, and only
        those fields)."""
        self.runs[run.id] = run
        if old is None:
            self.contracts.drop(run.id)
        self.wheel.schedule(run)
        self.groups.file(run, now)
        if run.state.terminal:
            self._terminal.add(run.id)
        else:
            self._terminal.discard(run.id)

    def publish(self, run: RunRecord, *, urgent: bool = True) -> None:
        self.events.publish_run(run, self._render, urgent=urgent)

    def warnings(self, reported: list[str], run: RunFacts) -> list[str]:
        """The adapter's warnings, then the recoverability warnings ``run``'s facts imply;
        one list object for every run with the same warnings (100,000 runs mostly share a
        handful; nothing changes a run's list in place)."""
        key = (*reported, *recoverability_warnings(run))
        shared = self._warning_lists.get(key)
        if shared is None:
            if len(self._warning_lists) >= 4096:
                self._warning_lists.clear()
            shared = self._warning_lists[key] = list(key)
        return shared

    def refresh(self, run_id: str, now: datetime, base: Run | None = None) -> None:
        """Merge the run anew; publish it if it changed."""
        merged = self._merge(run_id, now, base)
        if merged is None:
            return
        old = self.runs.get(run_id)
        if old is not None and old.state != merged.state:
            merged.updated_at = now  # the unified state changed here
        elif old is not None and old.updated_at > merged.updated_at:
            merged.updated_at = old.updated_at
        self.install(merged, now)
        if old is None or _differs(old, merged):
            self.publish(merged)

    def _merge(self, run_id: str, now: datetime, base: Run | None = None) -> RunRecord | None:
        """The run as shown: the adapter's report (``base``, the run as the adapter just
        reported it, or else the merged run, whose other fields are the adapter's) with the
        agent's latest beat and the pending interrupts merged in."""
        observed = self.observed.get(run_id)
        last: RunFacts | None = base if base is not None else self.runs.get(run_id)
        if observed is None or last is None:
            return None
        beat = self.beats.facts.get(run_id)
        update: dict[str, Any] = {
            "interrupts": self.interrupts.pending(run_id),
            "state": observed.state, "heartbeat_at": observed.heartbeat_at,
            "heartbeat_interval_s": observed.heartbeat_interval_s,
            "heartbeat_timeout_s": observed.heartbeat_timeout_s,
            "progress": observed.progress, "resources": observed.resources,
            "in_flight_step": observed.in_flight_step, "updated_at": observed.updated_at,
        }
        if beat is not None:
            update["heartbeat_at"] = beat.at or now
            if beat.interval_s:
                update["heartbeat_interval_s"] = beat.interval_s
            if beat.timeout_s:
                update["heartbeat_timeout_s"] = beat.timeout_s
            if beat.progress is not None:
                update["progress"] = beat.progress
            if beat.resources is not None:
                update["resources"] = list(beat.resources)
            update["in_flight_step"] = beat.in_flight_step
        merged = copy_run(last, update)
        check = self.releases.checks.get(run_id)
        if merged.state in (RunState.PAUSED, RunState.CANCELLED) and check is not None:
            # the backend already says so; the agent has not confirmed its release yet
            merged.state = (RunState.PAUSING if check.action == "pause"
                            else RunState.CANCELLING)
        else:
            merged.state = unified_state(merged, now)
        # every run of every backend: the adapter's own warnings, then the recoverability
        # warnings its facts imply (facts merged from the agent's beats included)
        merged.warnings = self.warnings(observed.warnings, merged)
        return merged

    # ------------------------------------------------------------------- fed by beats

    def flush(self, now: datetime, run_ids: Iterable[str] | None = None) -> None:
        """Merge the beats accepted since the last flush (one event per run at most);
        ``run_ids``: those of them, taken from the beats before (a flush in slices)."""
        beat_only, beat_merge, merged = self._beat_only, self._beat_merge, False
        for run_id in self.beats.take_dirty() if run_ids is None else run_ids:
            if beat_only(run_id, now) or beat_merge(run_id, now):
                merged = True
            else:
                self.refresh(run_id, now)
        if merged:
            self.events.beats_wait()

    def _beat_only(self, run_id: str, now: datetime) -> bool:
        """The fast path of a flush: when the latest beat changes nothing but the run's
        heartbeat time and progress (same state, cadence, resources, step; no release
        check), update the merged run in place and publish a beat event. False: the full
        merge is needed."""
        run = self.runs.get(run_id)
        beat = self.beats.facts.get(run_id)
        observed = self.observed.get(run_id)
        if run is None or beat is None or observed is None or run_id in self.releases.checks:
            return False
        # what _merge would set, field by field
        if ((beat.interval_s or observed.heartbeat_interval_s) != run.heartbeat_interval_s
                or (beat.timeout_s or observed.heartbeat_timeout_s) != run.heartbeat_timeout_s
                or beat.in_flight_step != run.in_flight_step
                or (beat.resources if beat.resources is not None
                    else observed.resources) != run.resources
                or (beat.progress is None and run.progress != observed.progress)):
            return False
        at = beat.at or now
        due = fresh_due(at, now, run.heartbeat_interval_s, run.heartbeat_timeout_s) if (
            observed.state is _RUNNING and run.observed_at is None
            and at.tzinfo is not None) else None
        if due is not None:  # live: what unified_state would say, without asking it
            if (_WAITING if run.interrupts else _RUNNING) is not run.state:
                return False
            run.heartbeat_at = at
            self.wheel.move(run.id, due)
        else:
            last, state = run.heartbeat_at, run.state
            run.heartbeat_at, run.state = at, observed.state
            try:
                new_state = unified_state(run, now)
            finally:
                run.state = state
            if new_state is not state:
                run.heartbeat_at = last
                return False
            self.wheel.schedule(run)
        progress = beat.progress
        if progress is not None:
            if progress != run.progress:
                self.groups.progress.mark(run_id, progress, now)
            run.progress = progress
        self.events.publish_beat(run, self._render)
        return True

    def _beat_merge(self, run_id: str, now: datetime) -> bool:
        """The next path of a flush (a run's first beat, or one that announces another
        cadence or timeout, or changes the state): when the beat leaves the resources and
        the in-flight step as they are and no release check waits, the merged run is the
        current one with the heartbeat fields, state and warnings the full merge would give
        (field by field, without a merge from the adapter's report or a comparison of the
        two versions); published as a lazily rendered ``run`` event. False: the full merge
        is needed."""
        run = self.runs.get(run_id)
        beat = self.beats.facts.get(run_id)
        observed = self.observed.get(run_id)
        if run is None or beat is None or observed is None or run_id in self.releases.checks:
            return False
        if beat.in_flight_step != run.in_flight_step or (
                beat.resources if beat.resources is not None
                else observed.resources) != run.resources:
            return False
        new = copy_run(run, {
            "heartbeat_at": beat.at or now,
            "heartbeat_interval_s": beat.interval_s or observed.heartbeat_interval_s,
            "heartbeat_timeout_s": beat.timeout_s or observed.heartbeat_timeout_s,
            "progress": beat.progress if beat.progress is not None else observed.progress,
            "state": observed.state,
        })
        new.state = unified_state(new, now)
        if new.heartbeat_timeout_s != run.heartbeat_timeout_s \
                or new.state.terminal or run.state.terminal:
            # else the facts the warnings come from are the run's: its warnings stay
            new.warnings = self.warnings(observed.warnings, new)
        changed = new.state is not run.state
        if changed:
            new.updated_at = now  # the unified state changed here
        self.install(new, now, run)
        self.publish(new, urgent=changed)
        return True


def _differs(a: RunRecord, b: RunRecord) -> bool:
    """Do two versions of a run differ in anything but ``updated_at``?"""
    return _compared(a) != _compared(b)


_compared = attrgetter(*(k for k in FIELDS if k != "updated_at"))
