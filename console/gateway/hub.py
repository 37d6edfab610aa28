"""The hub: the gateway's state, as one object the server, peering and the executor share.

It holds the parts, each with one job, and passes them to each other's constructors so the
arrows run one way (DESIGN.md §2, "Inside the gateway"):

- :mod:`~console.gateway.event_log`: sequence numbers, the bounded log, subscribers (fan-out);
- :mod:`~console.gateway.run_store`: the index of runs (adapters' reports merged with the
  agents' beats, :mod:`~console.gateway.agent_beats`, and release checks,
  :mod:`~console.gateway.release_checks`);
- :mod:`~console.gateway.interrupt_store`: the index of interrupts, shown through the
  four-eyes overlay given at construction (it reads the journal's approvals; nobody here
  calls the command executor);
- :mod:`~console.gateway.liveness_clock`: silence turning runs late and lost, each tick.

The hub adds what spans them: the backends' health, the snapshot, and the order of a beat's
or a tick's work inside one batch of wake-ups.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from console.gateway.agent_beats import AgentBeats, Reporter
from console.gateway.event_log import MAX_LAG, Event, EventLog, Subscriber, lag_decision
from console.gateway.interrupt_store import InterruptOverlay, InterruptStore, no_overlay
from console.gateway.liveness_clock import TICK_BUDGET_S, LivenessClock, LivenessWheel
from console.gateway.plain_beats import PlainBeats
from console.gateway.protocol import AgentHeartbeat, SubscriptionFilter
from console.gateway.release_checks import ReleaseChecks
from console.gateway.run_contracts import AS_IS
from console.gateway.run_store import AdapterView, RunStore
from console.model import BackendHealth, Heartbeat, Interrupt, Run, utcnow
from console.run_record import RunRecord

FLUSH_SLICE = 400  # runs merged between two yields to the event loop (~4 ms)

# the names the server imports from here (their homes: event_log.py, agent_beats.py)
__all__ = ["Event", "Hub", "Reporter", "Subscriber", "lag_decision"]


class Hub:
    def __init__(
        self, *, event_log_size: int = 100_000, clock: Callable[[], datetime] = utcnow,
        max_lag: int = MAX_LAG, interrupt_overlay: InterruptOverlay = no_overlay,
    ) -> None:
        self.clock = clock  # "now" for liveness, TTLs and release deadlines (tests inject one)
        self.events = EventLog(size=event_log_size, max_lag=max_lag)
        observed: dict[str, AdapterView] = {}
        self.beats = AgentBeats(observed, clock)
        self.releases = ReleaseChecks(self.beats, self.events.publish, clock)
        self.interrupt_store = InterruptStore(self.events.publish, shown=interrupt_overlay)
        wheel = LivenessWheel()
        self.run_store = RunStore(self.events, self.beats, self.releases, self.interrupt_store,
                                  wheel, observed=observed, clock=clock)
        self.liveness = LivenessClock(wheel, self.run_store, budget_s=TICK_BUDGET_S)
        self.plain_beats = PlainBeats(self.beats, self.releases.checks)
        self.backends: dict[str, BackendHealth] = {}
        #: more parts of the snapshot, by key, set by the gateway (``obligations``, ``policy``)
        self.snapshot_parts: dict[str, Callable[[], Any]] = {}
        # the parts' containers under the names the server, peering and tests read
        self.runs = self.run_store.runs
        self.interrupts = self.interrupt_store.interrupts
        self.log = self.events.log
        self.subscribers = self.events.subscribers
        self.listeners = self.events.listeners
        self.unknown = self.beats.unknown
        self.history = self.beats.history
        self.release_checks = self.releases.checks
        self._beats = self.beats.facts
        self._contracts = self.run_store.contracts.static

    # ------------------------------------------------------------- counters and knobs

    @property
    def epoch(self) -> str:
        return self.events.epoch

    @property
    def seq(self) -> int:
        return self.events.seq

    @property
    def max_lag(self) -> int:
        return self.events.max_lag

    @max_lag.setter
    def max_lag(self, value: int) -> None:
        self.events.max_lag = value

    @property
    def tick_budget_s(self) -> float:
        return self.liveness.budget_s

    @tick_budget_s.setter
    def tick_budget_s(self, value: float) -> None:
        self.liveness.budget_s = value

    @property
    def liveness_backlog(self) -> int:
        return self.liveness.backlog

    @property
    def stale_beats(self) -> int:
        return self.beats.stale_beats

    @property
    def beats_accepted(self) -> int:
        return self.beats.beats_accepted

    @property
    def takeovers(self) -> int:
        return self.beats.takeovers

    # ------------------------------------------------------------------------- events

    def publish(self, kind: str, data: dict[str, Any]) -> Event:
        return self.events.publish(kind, data)

    def events_since(self, since: int) -> list[Event] | None:
        return self.events.events_since(since)

    def take(self, sub: Subscriber, limit: int = 20_000) -> list[Event] | None:
        return self.events.take(sub, limit)

    def snapshot(self, now: datetime | None = None,
                 flt: SubscriptionFilter | None = None, *,
                 with_runs: bool = True) -> dict[str, Any]:
        """The whole state (or what ``flt`` admits of it) at ``seq``; ``with_runs=False``:
        ``runs`` empty (the server encodes them in chunks: :meth:`admitted_runs`)."""
        now = now or self.clock()
        runs, interrupts, backends = self._admitted(flt)
        return {
            "type": "snapshot",
            "epoch": self.epoch,
            "seq": self.seq,
            "runs": [r.contract(now) for r in runs] if with_runs else [],
            "interrupts": [i.contract(now) for i in interrupts],
            "backends": [b.contract(now) for b in backends],
            **{key: part() for key, part in self.snapshot_parts.items()},
        }

    def run(self, run_id: str) -> Run | None:
        """An indexed run as a ``Run`` model, for what leaves the index (a command's plan, a
        detail); the index keeps records (run_record.py)."""
        record = self.runs.get(run_id)
        return None if record is None else record.to_run()

    def admitted_runs(self, flt: SubscriptionFilter | None = None) -> list[RunRecord]:
        return self._admitted(flt)[0]

    def _admitted(self, flt: SubscriptionFilter | None
                  ) -> tuple[list[RunRecord], list[Interrupt], list[BackendHealth]]:
        runs = list(self.runs.values())
        interrupts = list(self.interrupts.values())
        backends = list(self.backends.values())
        if flt is None:
            return runs, interrupts, backends
        contexts = set(flt.contexts) if flt.contexts is not None else None
        kinds = set(flt.kinds) if flt.kinds is not None else None
        runs = [] if kinds is not None and "run" not in kinds else [
            r for r in runs if contexts is None or f"{r.backend}:{r.context}" in contexts]
        interrupts = [] if kinds is not None and "interrupt" not in kinds else [
            i for i in interrupts if contexts is None or i.run_id.split("/", 1)[0] in contexts]
        backends = [] if kinds is not None and "backend" not in kinds else [
            b for b in backends if contexts is None or b.key in contexts]
        return runs, interrupts, backends

    def contract_bytes(self, run: RunRecord, now: datetime, *, at: Any = AS_IS,
                       progress: Any = AS_IS) -> bytes:
        """``encode(run.contract(now))``, its rest cached (run_contracts.py)."""
        return self.run_store.contracts.encoded(run, now, at=at, progress=progress)

    # ------------------------------------------------------------------------ backends

    def set_health(self, health: BackendHealth) -> None:
        old = self.backends.get(health.key)
        self.backends[health.key] = health
        if old is None or (old.reachable, old.error) != (health.reachable, health.error):
            self.publish("backend", health.contract())

    # ------------------------------------------------------------ runs and interrupts

    def observe_runs(self, runs: Iterable[Run], gone: list[str] | None = None) -> None:
        self.run_store.observe(runs, gone, self.clock())

    def observe_interrupts(self, context_key: str, interrupts: list[Interrupt],
                           complete: bool, decided: Callable[[str], Any]) -> None:
        """Merge one backend context's pending interrupts (interrupt_store.py); the runs
        whose interrupts changed are merged anew."""
        touched = self.interrupt_store.observe(context_key, interrupts, complete, decided)
        now = self.clock()
        for run_id in touched:
            self.run_store.refresh(run_id, now)

    def mark_decided(self, interrupt_id: str, claim: Any) -> None:
        run_id = self.interrupt_store.mark_decided(interrupt_id, claim)
        if run_id is not None:
            self.run_store.refresh(run_id, self.clock())

    def show_approvals(self, interrupt_id: str) -> None:
        """The interrupt's approvals changed (here or through a peer): show it anew."""
        self.interrupt_store.reshow(interrupt_id)

    def expect_release(self, run_id: str, action: str, resource_ids: set[str],
                       within_s: float, since: datetime | None = None) -> None:
        """After pause/cancel: watch for the agent's report; flag a suspected leak if late
        (release_checks.py). Only for runs whose agent reports to the gateway."""
        if self.releases.expect(run_id, action, resource_ids, within_s, since):
            self.run_store.refresh(run_id, self.clock())

    # -------------------------------------------------------------------- agent beats

    @property
    def takes_plain_beats(self) -> bool:
        """May plain beats be taken by hand (:attr:`plain_beats`), without a model each?"""
        return True

    def agent_heartbeat(self, run_id: str, beat: AgentHeartbeat,
                        reporter: Reporter | None = None, size: int = 0,
                        now: datetime | None = None) -> None:
        """Record a beat; the run event goes out at the next coalescing flush.

        Raises :class:`FrameError` ``bound_to_other`` when the run's beats come from another
        token that may not take it over yet. ``size``: the frame's bytes (for the bound on
        beats of unknown runs). ``now``: the hub's clock as the caller read it (the beats of
        one frame share it)."""
        facts = self.beats.accept(run_id, beat, reporter, size, now or self.clock())
        if facts is not None and self.release_checks:
            self.releases.verify(run_id, facts, reporter)

    def heartbeat_history(self, run_id: str) -> list[Heartbeat]:
        return self.beats.heartbeat_history(run_id)

    def focus(self, run_ids: list[str]) -> None:
        self.beats.focus(run_ids)

    def check_reporter(self, run_id: str, reporter: Reporter) -> None:
        self.beats.check_reporter(run_id, reporter)

    def unbind(self, run_id: str) -> None:
        self.beats.unbind(run_id)

    def bound_to(self, run_id: str) -> Reporter | None:
        return self.beats.bound_to(run_id)

    # ----------------------------------------------------------------------- the loops

    def flush_heartbeats(self) -> None:
        """Merge the beats accepted since the last flush; wake the subscribers once."""
        now = self.clock()
        with self.events.batch():
            self.run_store.flush(now)

    async def flush_heartbeats_sliced(self, size: int = FLUSH_SLICE) -> None:
        """:meth:`flush_heartbeats` in slices of ``size`` runs, yielding to the event loop
        between them: 2,000 beats are ~20 ms of merging, and a state change published
        meanwhile waited that long for its clients. The runs are those beaten before it
        began (beats arriving meanwhile wait for the next flush: one event per run per
        window still)."""
        dirty = list(self.beats.take_dirty())
        for start in range(0, len(dirty), size):
            if start:
                await asyncio.sleep(0)
            with self.events.batch():
                self.run_store.flush(self.clock(), dirty[start:start + size])

    def tick(self) -> None:
        """Re-evaluate liveness of the runs whose deadline has come, and expire release
        checks, finished runs and old interrupts; wake the subscribers once."""
        with self.events.batch():
            now = self.clock()
            self.liveness.judge_due(now)
            self.run_store.expire_finished(now)
            for run_id in self.releases.overdue(now):
                self.releases.suspect_leak(run_id)
                self.run_store.refresh(run_id, self.clock())
            self.interrupt_store.expire(now)
