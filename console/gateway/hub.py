"""The hub: the gateway's index of runs, interrupts and backends, and its event log.

Every change becomes an event with a monotonically increasing sequence number, kept in a
bounded log so a reconnecting client resumes from its last number. Heartbeats pushed by agents
are merged into the runs they belong to and coalesced: a flood of beats becomes at most one
``run`` event per run per coalescing window. Liveness is re-evaluated every tick, so silence
turns a run ``late`` and then ``lost`` without any event from the agent.

Each run's beats are bound to the token that first reported it (:class:`Reporter`); beats from
another token are refused until the bound one has been silent past its timeout or an
operator resumed the run (see SECURITY.md). Beats for runs no adapter knows are held in a
bounded store (:mod:`console.gateway.unknown_beats`) and adopted when the run appears.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from console.gateway.protocol import AgentHeartbeat, FrameError
from console.gateway.unknown_beats import UnknownBeats
from console.model import (
    BackendHealth,
    DecisionRecord,
    Heartbeat,
    Interrupt,
    Run,
    RunState,
    utcnow,
)
from console.semantics import beat_is_stale, recoverability_warnings, unified_state

HEARTBEAT_HISTORY = 120
DECIDED_INTERRUPT_TTL = timedelta(minutes=10)
FINISHED_RUN_TTL = timedelta(hours=1)  # finished runs leave the live index (audit keeps them)
MAX_UNKNOWN_RUNS = 10_000  # runs no adapter knows whose latest beat is kept
MAX_UNKNOWN_BYTES = 16 << 20  # and the bytes of those beats' frames
DEFAULT_TAKEOVER_S = 60.0  # silence after which another token may take a run over (no timeout_s)


@dataclass(frozen=True)
class Reporter:
    """The token a beat came from: ``token_id`` binds, ``identity`` is for messages."""

    token_id: str
    identity: str


@dataclass
class _Unknown:
    beat: AgentHeartbeat
    reporter: Reporter | None


@dataclass
class ReleaseCheck:
    """After pause/cancel: the resources the agent must report released, by a deadline."""

    action: str
    expected: set[str]
    deadline: datetime
    reporter: Reporter | None = None  # only the token bound at the time may confirm


@dataclass(eq=False)
class Subscriber:
    """A connected client's pending events; the server flushes them in batches."""

    wake: Callable[[], None]
    pending: list[dict[str, Any]] = field(default_factory=list)
    overflowed: bool = False


class Hub:
    def __init__(
        self, *, event_log_size: int = 100_000, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.clock = clock  # "now" for liveness, TTLs and release deadlines (tests inject one)
        self.epoch = uuid.uuid4().hex[:12]
        self.seq = 0
        self.log: deque[dict[str, Any]] = deque(maxlen=event_log_size)
        self.runs: dict[str, Run] = {}  # merged view (adapter + agent heartbeats)
        self._observed: dict[str, Run] = {}  # as the adapter last reported it
        self._beats: dict[str, AgentHeartbeat] = {}  # latest agent beat per known run id
        self._beat_seen: dict[str, datetime] = {}  # when the gateway accepted that beat
        self._bound: dict[str, Reporter] = {}  # known run id -> the token its beats come from
        self.unknown: UnknownBeats[_Unknown] = UnknownBeats(
            max_runs=MAX_UNKNOWN_RUNS, max_bytes=MAX_UNKNOWN_BYTES)
        self.stale_beats = 0  # beats ignored because a newer one was already accepted
        self.takeovers = 0  # runs whose binding moved to another token
        self.history: dict[str, deque[Heartbeat]] = {}
        self.interrupts: dict[str, Interrupt] = {}
        #: set by the command executor: an interrupt as shown (four-eyes approvals so far)
        self.interrupt_overlay: Callable[[Interrupt], Interrupt] = lambda intr: intr
        self._pending_by_run: dict[str, set[str]] = {}  # run id -> pending interrupt ids
        self.backends: dict[str, BackendHealth] = {}
        self.release_checks: dict[str, ReleaseCheck] = {}
        self.subscribers: set[Subscriber] = set()
        self._dirty: set[str] = set()
        self.max_pending = 50_000
        #: more parts of the snapshot, by key, set by the gateway (``obligations``, ``policy``)
        self.snapshot_parts: dict[str, Callable[[], Any]] = {}
        #: called with every published event (the webhooks classify; they must not block)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    # ------------------------------------------------------------------------- events

    def publish(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        self.seq += 1
        event = {"seq": self.seq, "kind": kind, "data": data}
        self.log.append(event)
        for sub in self.subscribers:
            if sub.overflowed:
                continue
            sub.pending.append(event)
            if len(sub.pending) > self.max_pending:
                sub.overflowed = True  # the server sends it a fresh snapshot instead
                sub.pending.clear()
            sub.wake()
        for listener in self.listeners:
            listener(event)
        return event

    def events_since(self, since: int) -> list[dict[str, Any]] | None:
        """Events after ``since``; None when the log no longer reaches back that far."""
        if since >= self.seq:
            return []
        if not self.log or self.log[0]["seq"] > since + 1:
            return None
        start = since + 1 - self.log[0]["seq"]
        return [self.log[i] for i in range(start, len(self.log))]

    def snapshot(self, now: datetime | None = None) -> dict[str, Any]:
        now = now or self.clock()
        return {
            "type": "snapshot",
            "epoch": self.epoch,
            "seq": self.seq,
            "runs": [r.contract(now) for r in self.runs.values()],
            "interrupts": [i.contract(now) for i in self.interrupts.values()],
            "backends": [b.contract(now) for b in self.backends.values()],
            **{key: part() for key, part in self.snapshot_parts.items()},
        }

    # ------------------------------------------------------------------------ backends

    def set_health(self, health: BackendHealth) -> None:
        old = self.backends.get(health.key)
        self.backends[health.key] = health
        if old is None or (old.reachable, old.error) != (health.reachable, health.error):
            self.publish("backend", health.contract())

    # ---------------------------------------------------------------------------- runs

    def observe_runs(self, runs: list[Run], gone: list[str] | None = None) -> None:
        now = self.clock()
        for run in runs:
            self._observed[run.id] = run
            if run.id in self.unknown:
                self._adopt(run.id)
            self._refresh(run.id, now)
        for run_id in gone or []:
            self._forget_run(run_id)

    def _forget_run(self, run_id: str) -> None:
        self._observed.pop(run_id, None)
        self._beats.pop(run_id, None)
        self._beat_seen.pop(run_id, None)
        self._bound.pop(run_id, None)
        self.unknown.pop(run_id)
        self.history.pop(run_id, None)
        self.release_checks.pop(run_id, None)
        if self.runs.pop(run_id, None) is not None:
            self.publish("run_removed", {"id": run_id})

    def _merge(self, run_id: str, now: datetime) -> Run | None:
        observed = self._observed.get(run_id)
        if observed is None:
            return None
        beat = self._beats.get(run_id)
        update: dict[str, Any] = {"interrupts": sorted(self._pending_by_run.get(run_id, ()))}
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
        merged = observed.model_copy(update=update)
        check = self.release_checks.get(run_id)
        if merged.state in (RunState.PAUSED, RunState.CANCELLED) and check is not None:
            # the backend already says so; the agent has not confirmed its release yet
            merged.state = RunState.PAUSING if check.action == "pause" else RunState.CANCELLING
        else:
            merged.state = unified_state(merged, now)
        # every run of every backend: the adapter's own warnings, then the recoverability
        # warnings its facts imply (facts merged from the agent's beats included)
        merged.warnings = [*observed.warnings, *recoverability_warnings(merged)]
        return merged

    def _refresh(self, run_id: str, now: datetime) -> None:
        merged = self._merge(run_id, now)
        if merged is None:
            return
        old = self.runs.get(run_id)
        if old is not None and old.state != merged.state:
            merged.updated_at = now  # the unified state changed here, not in the backend
        elif old is not None and old.updated_at > merged.updated_at:
            merged.updated_at = old.updated_at
        self.runs[run_id] = merged
        if old is None or _differs(old, merged):
            self.publish("run", merged.contract(now))

    def agent_heartbeat(self, run_id: str, beat: AgentHeartbeat,
                        reporter: Reporter | None = None, size: int = 0) -> None:
        """Record a beat; the run event goes out at the next coalescing flush.

        Raises :class:`FrameError` ``bound_to_other`` when the run's beats come from another
        token that may not take it over yet. ``size``: the frame's bytes (for the bound on
        beats of unknown runs)."""
        now = self.clock()
        known = run_id in self._observed
        held = None if known else self.unknown.get(run_id)
        last = self._beats.get(run_id) if known else (held.beat if held else None)
        bound = self._bound.get(run_id) if known else (held.reporter if held else None)
        if reporter is not None and bound is not None and bound.token_id != reporter.token_id:
            if not self._may_take_over(run_id, last, now):
                raise FrameError(
                    "bound_to_other",
                    f"{run_id} reports through another agent token; a different token may "
                    "take it over only after that one fell silent past its timeout or an "
                    "operator resumed the run")
            self.takeovers += 1
            last = None  # the new worker's counter starts afresh
        if last is not None and beat_is_stale(beat.seq, beat.at, last.seq, last.at):
            self.stale_beats += 1  # built before the beat we have; would undo its report
            return
        beat = beat if beat.at else beat.model_copy(update={"at": now})
        owner = reporter if reporter is not None else bound
        if not known:
            self.unknown.put(run_id, _Unknown(beat, owner), size or 512)
            return
        self._beats[run_id] = beat
        self._beat_seen[run_id] = now
        if owner is not None:
            self._bound[run_id] = owner
        self._record(run_id, beat)
        self._verify_release(run_id, beat, reporter)
        self._dirty.add(run_id)

    def _record(self, run_id: str, beat: AgentHeartbeat) -> None:
        hist = self.history.setdefault(run_id, deque(maxlen=HEARTBEAT_HISTORY))
        hist.append(
            Heartbeat(at=beat.at or self.clock(), seq=beat.seq, progress=beat.progress,
                      details=beat.details, resources=beat.resources)
        )

    def _adopt(self, run_id: str) -> None:
        """A run an adapter now shows: its held beat (and binding) become the run's."""
        held = self.unknown.pop(run_id)
        if held is None:
            return
        self._beats[run_id] = held.beat
        if held.reporter is not None:
            self._bound[run_id] = held.reporter
        self._record(run_id, held.beat)

    def _may_take_over(self, run_id: str, last: AgentHeartbeat | None, now: datetime) -> bool:
        """Another token may report for a run once its bound token has been silent longer
        than the run's timeout (the worker died; a sibling resumed it)."""
        if last is None or last.at is None:
            return True
        run = self._observed.get(run_id)
        timeout = last.timeout_s or (run.heartbeat_timeout_s if run else None)
        at = last.at if last.at.tzinfo is not None else last.at.replace(tzinfo=now.tzinfo)
        return (now - at).total_seconds() > (timeout or DEFAULT_TAKEOVER_S)

    def check_reporter(self, run_id: str, reporter: Reporter) -> None:
        """For frames other than beats (policy events): FrameError ``bound_to_other`` when
        the run's beats come from another token that may not take it over yet. Never binds."""
        bound = self.bound_to(run_id)
        if bound is None or bound.token_id == reporter.token_id:
            return
        held = self.unknown.get(run_id)
        last = self._beats.get(run_id) if run_id in self._observed else (
            held.beat if held else None)
        if not self._may_take_over(run_id, last, self.clock()):
            raise FrameError("bound_to_other", f"{run_id} reports through another agent token")

    def unbind(self, run_id: str) -> None:
        """An operator resumed the run: whichever worker of its scope picks it up reports."""
        self._bound.pop(run_id, None)

    def bound_to(self, run_id: str) -> Reporter | None:
        if run_id in self._observed:
            return self._bound.get(run_id)
        held = self.unknown.get(run_id)
        return held.reporter if held else None

    def flush_heartbeats(self) -> None:
        now = self.clock()
        dirty, self._dirty = self._dirty, set()
        for run_id in dirty:
            self._refresh(run_id, now)

    def tick(self) -> None:
        """Re-evaluate liveness of live runs and expire release checks and old interrupts."""
        now = self.clock()
        for run_id, run in list(self.runs.items()):
            # silence alone moves running -> late -> lost; refresh only where that happens
            if run.heartbeat_at is not None and unified_state(run, now) is not run.state:
                self._refresh(run_id, now)
        for run_id in [r.id for r in self.runs.values()
                       if r.state.terminal and now - r.updated_at > FINISHED_RUN_TTL]:
            self._forget_run(run_id)
        for run_id, check in list(self.release_checks.items()):
            if now >= check.deadline:
                self._suspect_leak(run_id, check)
        for iid, intr in list(self.interrupts.items()):
            decided_at = intr.decision.at if intr.decision else intr.created_at
            if intr.status != "pending" and now - decided_at > DECIDED_INTERRUPT_TTL:
                self._forget_interrupt(iid)
                self.publish("interrupt_removed", {"id": iid})

    # -------------------------------------------------------------- release checks

    def expect_release(self, run_id: str, action: str, resource_ids: set[str],
                       within_s: float, since: datetime | None = None) -> None:
        """After pause/cancel: watch for the agent's report; flag a suspected leak if late.

        Only for runs whose agent reports to the gateway (otherwise nobody could confirm).
        ``since``: when the command was sent to the backend; a beat the gateway accepted
        before that (say the "paused, released" report of an earlier pause, when a pause
        follows a resume before the agent beat again) confirms nothing."""
        if run_id not in self._beats:
            return
        self.release_checks[run_id] = ReleaseCheck(
            action=action, expected=set(resource_ids),
            deadline=self.clock() + timedelta(seconds=within_s),
            reporter=self._bound.get(run_id),
        )
        # The agent may have noticed the action and reported its release before the backend
        # call returned to us (a Restate handler sees its cancel at once): that report counts.
        seen = self._beat_seen.get(run_id)
        if since is None or (seen is not None and seen >= since):
            self._verify_release(run_id, self._beats[run_id], self._bound.get(run_id))
        self._refresh(run_id, self.clock())

    def _verify_release(self, run_id: str, beat: AgentHeartbeat,
                        reporter: Reporter | None) -> None:
        check = self.release_checks.get(run_id)
        if check is None:
            return
        if check.reporter is not None and (
            reporter is None or reporter.token_id != check.reporter.token_id
        ):
            return  # only the worker that held the resources can say it released them
        released = {r.id for r in beat.resources or [] if r.state == "released"}
        stopped = beat.phase in ("paused", "cancelled", "completed", "failed")
        if stopped and check.expected <= released:
            del self.release_checks[run_id]
            kept = [r.id for r in beat.resources or [] if r.state == "held"]
            self.publish("notice", {
                "level": "info", "run_id": run_id,
                "message": f"{run_id}: {check.action} confirmed by the agent; released "
                + (", ".join(sorted(check.expected)) or "nothing")
                + ("; kept " + ", ".join(kept) if kept else ""),
            })

    def _suspect_leak(self, run_id: str, check: ReleaseCheck) -> None:
        del self.release_checks[run_id]
        beat = self._beats.get(run_id)
        if beat is not None and beat.resources is not None:
            marked = [
                r.model_copy(update={"state": "suspected_leak"})
                if r.id in check.expected and r.state != "released" else r
                for r in beat.resources
            ]
            self._beats[run_id] = beat.model_copy(update={"resources": marked})
        self.publish("notice", {
            "level": "warning", "run_id": run_id,
            "message": f"{run_id}: no release report after {check.action}; suspected leak of "
            + ", ".join(sorted(check.expected)),
        })
        self._refresh(run_id, self.clock())

    # ---------------------------------------------------------------------- interrupts

    def observe_interrupts(self, context_key: str, interrupts: list[Interrupt],
                           complete: bool, decided: Callable[[str], Any]) -> None:
        """Merge one backend context's pending interrupts.

        ``decided(interrupt_id)`` returns the journal's decision claim (or None): an interrupt
        the backend still shows as pending but the journal has decided is shown as decided
        (the agent has not consumed the decision yet), so nobody decides it twice.
        """
        seen: set[str] = set()
        touched_runs: set[str] = set()
        for intr in interrupts:
            seen.add(intr.id)
            known = self.interrupts.get(intr.id)
            if known is not None and known.status != "pending":
                continue
            claim = decided(intr.id)
            if claim is not None and claim.status == "applied":
                intr = _as_decided(intr, claim)
            intr = self.interrupt_overlay(intr)
            if known is None or known.model_dump() != intr.model_dump():
                self._put_interrupt(intr)
                self.publish("interrupt", intr.contract())
                touched_runs.add(intr.run_id)
        if complete:
            for iid, intr in list(self.interrupts.items()):
                if iid in seen or intr.status != "pending":
                    continue
                if not intr.run_id.startswith(context_key + "/"):
                    continue
                claim = decided(iid)
                new = (
                    _as_decided(intr, claim) if claim is not None and claim.status == "applied"
                    else intr.model_copy(update={"status": "withdrawn"})
                )
                self._put_interrupt(new)
                self.publish("interrupt", new.contract())
                touched_runs.add(intr.run_id)
        now = self.clock()
        for run_id in touched_runs:
            self._refresh(run_id, now)

    def _put_interrupt(self, intr: Interrupt) -> None:
        self.interrupts[intr.id] = intr
        pending = self._pending_by_run.setdefault(intr.run_id, set())
        if intr.status == "pending":
            pending.add(intr.id)
        else:
            pending.discard(intr.id)
            if not pending:
                del self._pending_by_run[intr.run_id]

    def _forget_interrupt(self, interrupt_id: str) -> None:
        intr = self.interrupts.pop(interrupt_id)
        pending = self._pending_by_run.get(intr.run_id)
        if pending is not None:
            pending.discard(interrupt_id)
            if not pending:
                del self._pending_by_run[intr.run_id]

    def mark_decided(self, interrupt_id: str, claim: Any) -> None:
        intr = self.interrupts.get(interrupt_id)
        if intr is None:
            return
        new = _as_decided(intr, claim)
        self._put_interrupt(new)
        self.publish("interrupt", new.contract())
        self._refresh(intr.run_id, self.clock())


def _as_decided(intr: Interrupt, claim: Any) -> Interrupt:
    return intr.model_copy(update={
        "status": "decided",
        "decision": DecisionRecord(kind=claim.kind, by=claim.identity, at=claim.at,
                                   command_id=claim.command_key),
    })


def _differs(a: Run, b: Run) -> bool:
    return a.model_dump(exclude={"updated_at"}) != b.model_dump(exclude={"updated_at"})
