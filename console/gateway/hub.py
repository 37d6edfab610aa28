"""The hub: the gateway's index of runs, interrupts and backends, and its event log.

Every change becomes an event with a monotonically increasing sequence number, kept in a
bounded log so a reconnecting client resumes from its last number. Heartbeats pushed by agents
are merged into the runs they belong to and coalesced: a flood of beats becomes at most one
``run`` event per run per coalescing window. Liveness is re-evaluated every tick, so silence
turns a run ``late`` and then ``lost`` without any event from the agent.

Events are encoded once, lazily, for all clients (:class:`Event`); subscribers are cursors
into the log, not queues of their own, so a slow client costs no memory beyond the log: when
its cursor falls more than ``max_lag`` events behind (or off the log), the server resyncs it
from a snapshot (:func:`lag_decision`). A beat that changes nothing but the run's heartbeat
time and progress takes a fast path and becomes a ``run`` event whose full form is rendered
only when a client asks for it; clients that asked for compact beats get ``beat`` events.
Liveness is re-evaluated only for runs whose late/lost deadline has come (a wheel of
one-second buckets), not for every run every second, and within a budget of wall time per
tick (:data:`TICK_BUDGET_S`): an overloaded gateway judges the rest at its next tick, in
deadline order, and says how many wait (``liveness_backlog``); a beat read meanwhile spares
the run a flip to late and back.

Each run's beats are bound to the token that first reported it (:class:`Reporter`); beats from
another token are refused until the bound one has been silent past its timeout or an
operator resumed the run (see SECURITY.md). Beats for runs no adapter knows are held in a
bounded store (:mod:`console.gateway.unknown_beats`) and adopted when the run appears.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple

import orjson

from console.gateway.protocol import AgentHeartbeat, FrameError, SubscriptionFilter, encode
from console.gateway.unknown_beats import UnknownBeats
from console.liveness import late_margin
from console.model import (
    BackendHealth,
    DecisionRecord,
    Heartbeat,
    Interrupt,
    Resource,
    Run,
    RunState,
    utcnow,
)
from console.semantics import (
    LIVE_STATES,
    beat_is_stale,
    recoverability_warnings,
    unified_state,
)

HEARTBEAT_HISTORY = 120
HISTORY_RUNS = 2_000  # runs whose recent beats are kept: the first to beat, and ...
MAX_FOCUS = 1_000  # ... the runs clients opened lately (least recently opened go first)
WHEEL_SLOTS_PER_S = 10  # the liveness wheel's resolution
MAX_LAG = 100_000  # events a subscriber may fall behind before it is resynced (the log's
# default size: a client is resynced when the log no longer reaches back to its cursor)
DECIDED_INTERRUPT_TTL = timedelta(minutes=10)
FINISHED_RUN_TTL = timedelta(hours=1)  # finished runs leave the live index (audit keeps them)
MAX_UNKNOWN_RUNS = 10_000  # runs no adapter knows whose latest beat is kept
MAX_UNKNOWN_BYTES = 16 << 20  # and the bytes of those beats' frames
DEFAULT_TAKEOVER_S = 60.0  # silence after which another token may take a run over (no timeout_s)
#: wall time one tick may spend judging silence; what is left waits for the next tick, in
#: deadline order (a gateway behind on its beats would else judge runs late whose next beat
#: it has not read yet, and every such flip is undone by that beat: twice the work of a beat,
#: just when it is behind)
TICK_BUDGET_S = 0.05


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


class BeatFacts(NamedTuple):
    """What the hub keeps of a run's latest agent beat (a tenth of the parsed frame)."""

    seq: int
    at: datetime | None
    progress: float | None
    resources: list[Resource] | None
    interval_s: float | None
    timeout_s: float | None
    in_flight_step: str | None
    phase: str

    @staticmethod
    def of(beat: AgentHeartbeat) -> BeatFacts:
        return BeatFacts(beat.seq, beat.at, beat.progress, beat.resources, beat.interval_s,
                         beat.timeout_s, beat.in_flight_step, beat.phase)


class AdapterView(NamedTuple):
    """What the hub keeps of a run as its adapter last reported it: the fields the merge
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

    @staticmethod
    def of(run: Run) -> AdapterView:
        return AdapterView(run.state, run.heartbeat_at, run.heartbeat_interval_s,
                           run.heartbeat_timeout_s, run.progress, run.resources,
                           run.in_flight_step, run.warnings, run.updated_at)


#: fields of a run's contract that change without a new run object (the beat fast path),
#: with the time, or with what an agent's beats change (its cadence and timeout, the state,
#: the warnings those imply): the cached rest of a contract (Hub.contract_bytes) outlives
#: such changes, so a fleet's first beats do not void the contracts cached at its first poll
CONTRACT_DYNAMIC = ("heartbeat_at", "progress", "heartbeat_age_s", "observed_age_s",
                    "suspected_state", "state", "updated_at", "heartbeat_interval_s",
                    "heartbeat_timeout_s", "warnings")

_AS_IS: Any = object()  # Hub.contract_bytes: the run's own value

#: fields of a merged run that do not come from the adapter as they are
MERGED_FIELDS = frozenset({*AdapterView._fields, "interrupts"})

#: one beat in a run's history: at, seq, progress, details, resources (a tuple: a model per
#: beat cost more than the rest of a beat's handling)
BeatRecord = tuple[datetime, int, float | None, dict[str, Any], list[Resource] | None]


class Event(dict[str, Any]):
    """One published event, ``{"seq", "kind", "data"}``, with its encodings made once for
    every client. A beat event (``run_ref`` set) has no ``data`` stored: its full form (the
    run contract) is rendered from the run when first asked for, with the beat's heartbeat
    time and progress; its compact form is ``{"id", "heartbeat_at", "progress"}``."""

    __slots__ = ("scope", "run_ref", "beat", "state", "at", "render", "_full", "_compact")

    def __init__(self, seq: int, kind: str, data: dict[str, Any] | None,
                 scope: str | None, run_ref: Run | None = None,
                 beat: dict[str, Any] | None = None, *, state: bool = False) -> None:
        super().__init__(seq=seq, kind=kind)
        if data is not None:
            self["data"] = data
        self.scope = scope  # BACKEND:CONTEXT the event is about (None: no context)
        self.run_ref = run_ref
        self.beat = beat
        #: a ``run`` event rendered lazily from ``run_ref`` that is more than a beat (its
        #: state, cadence or warnings changed): every client gets its full form
        self.state = state
        #: the run's heartbeat time as of the event, and the hub's renderer of a run's
        #: contract with it (Hub.contract_bytes: cached between events and snapshots)
        self.at: datetime | None = None
        self.render: Callable[[Run, datetime | None, float | None], bytes] | None = None
        self._full: bytes | None = None
        self._compact: bytes | None = None

    @property
    def seq(self) -> int:
        return int(self["seq"])

    def __missing__(self, key: str) -> Any:
        if key == "data" and self.run_ref is not None and self.beat is not None:
            return self._render()
        if key == "data" and self._full is not None:  # dropped once encoded (see full())
            return orjson.loads(self._full)["data"]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def _render(self) -> dict[str, Any]:
        run, beat = self.run_ref, self.beat
        assert run is not None and beat is not None
        data = run.contract()
        data["heartbeat_at"] = beat["heartbeat_at"]
        data["progress"] = beat["progress"]
        return data

    def full(self) -> bytes:
        """The event as every client without compact beats gets it."""
        if self._full is None and self.render is not None and self.run_ref is not None \
                and self.beat is not None and "data" not in self:
            self._full = (b'{"seq":' + str(self["seq"]).encode() + b',"kind":"run","data":'
                          + self.render(self.run_ref, self.at, self.beat["progress"]) + b"}")
            if self.state:
                self.run_ref = None  # nor a run that may have been replaced since
        if self._full is None:
            self._full = encode({"seq": self["seq"], "kind": self["kind"], "data": self["data"]})
            # the log keeps the encoding, not the objects too (a run's contract is ~3x its
            # JSON in memory); ``event["data"]`` decodes it again
            dict.pop(self, "data", None)
            if self.state:
                self.run_ref = None  # nor a run that may have been replaced since
        return self._full

    def compact(self) -> bytes:
        """A beat event as a ``beat`` event; any other event as :meth:`full`."""
        if self.beat is None or self.state:
            return self.full()
        if self._compact is None:
            self._compact = encode({"seq": self["seq"], "kind": "beat", "data": self.beat})
        return self._compact


@dataclass(eq=False)
class Subscriber:
    """A connected client: a cursor into the hub's log; the server flushes in batches."""

    wake: Callable[[], None]
    cursor: int = 0  # the last seq this client was sent (or covered by its snapshot)
    filter: SubscriptionFilter | None = None
    compact_beats: bool = False
    urgent: bool = False  # a state event (not a beat) waits: flush soon
    resyncs: int = 0  # snapshots sent because the client fell behind


def lag_decision(cursor: int, seq: int, first_logged: int | None,
                 max_lag: int) -> Literal["current", "send", "resync"]:
    """What a subscriber at ``cursor`` gets when the hub is at ``seq`` and its log starts at
    ``first_logged``: nothing, the events after its cursor, or (too far behind, or the log
    no longer reaches back) a fresh snapshot."""
    if cursor >= seq:
        return "current"
    if seq - cursor > max_lag or first_logged is None or first_logged > cursor + 1:
        return "resync"
    return "send"


def event_scope(kind: str, data: dict[str, Any]) -> str | None:
    """The ``BACKEND:CONTEXT`` an event is about, for subscription filters (None: none)."""
    if kind == "backend":
        return f"{data.get('backend')}:{data.get('context')}"
    ref = data.get("run_id") if kind in ("interrupt", "notice", "obligation") else (
        data.get("target") if kind == "audit" else data.get("id"))
    if kind == "interrupt_removed":
        ref = data.get("id")
    if not isinstance(ref, str) or "/" not in ref:
        return None
    head = ref.split("/", 1)[0]
    return head if ":" in head else None


class Hub:
    def __init__(
        self, *, event_log_size: int = 100_000, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.clock = clock  # "now" for liveness, TTLs and release deadlines (tests inject one)
        self.epoch = uuid.uuid4().hex[:12]
        self.seq = 0
        self.log: deque[dict[str, Any]] = deque(maxlen=event_log_size)
        self.runs: dict[str, Run] = {}  # merged view (adapter + agent heartbeats)
        self._observed: dict[str, AdapterView] = {}  # as the adapter last reported it
        self._beats: dict[str, BeatFacts] = {}  # latest agent beat per known run id
        self._beat_seen: dict[str, datetime] = {}  # when the gateway accepted that beat
        self._bound: dict[str, Reporter] = {}  # known run id -> the token its beats come from
        self.unknown: UnknownBeats[_Unknown] = UnknownBeats(
            max_runs=MAX_UNKNOWN_RUNS, max_bytes=MAX_UNKNOWN_BYTES)
        self.stale_beats = 0  # beats ignored because a newer one was already accepted
        self.beats_accepted = 0  # beats merged into known runs
        self.takeovers = 0  # runs whose binding moved to another token
        self.tick_budget_s = TICK_BUDGET_S
        #: runs whose silence deadline has passed but were not judged yet (the tick's budget
        #: ran out): 0 unless the gateway is overloaded
        self.liveness_backlog = 0
        #: recent beats of the first HISTORY_RUNS runs to beat and of the focused runs
        self.history: dict[str, deque[BeatRecord]] = {}
        self.focused: OrderedDict[str, None] = OrderedDict()  # runs clients opened lately
        self.interrupts: dict[str, Interrupt] = {}
        #: set by the command executor: an interrupt as shown (four-eyes approvals so far)
        self.interrupt_overlay: Callable[[Interrupt], Interrupt] = lambda intr: intr
        self._pending_by_run: dict[str, set[str]] = {}  # run id -> pending interrupt ids
        self.backends: dict[str, BackendHealth] = {}
        self.release_checks: dict[str, ReleaseCheck] = {}
        self.subscribers: set[Subscriber] = set()
        self._dirty: set[str] = set()
        self.max_lag = MAX_LAG
        self._due: dict[int, set[str]] = {}  # 100 ms slot -> runs whose liveness may change
        self._due_of: dict[str, int] = {}
        self._terminal: set[str] = set()  # runs in a terminal state (for the TTL)
        self._warning_lists: dict[tuple[str, ...], list[str]] = {}  # see _warnings
        #: run id -> its contract encoded without the fields that change in place or with
        #: the time (CONTRACT_DYNAMIC); dropped when the run object is replaced
        self._contracts: dict[str, bytes] = {}
        self._isos: dict[int, tuple[datetime, str]] = {}  # see _iso
        self._batching = 0  # inside a flush or tick: subscribers are woken at its end
        self._pending_wake = 0  # 1: beats wait, 2: a state event waits
        #: more parts of the snapshot, by key, set by the gateway (``obligations``, ``policy``)
        self.snapshot_parts: dict[str, Callable[[], Any]] = {}
        #: called with every published event (the webhooks classify; they must not block)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    # ------------------------------------------------------------------------- events

    def publish(self, kind: str, data: dict[str, Any]) -> Event:
        self.seq += 1
        event = Event(self.seq, kind, data, event_scope(kind, data))
        self.log.append(event)
        self._notify(urgent=True)
        for listener in self.listeners:
            listener(event)
        event.full()  # encoded now, and only the encoding stays in the log
        return event

    def publish_run(self, run: Run, *, urgent: bool = True) -> Event:
        """A ``run`` event rendered from ``run`` when first asked for (a run's contract and
        its encoding cost more than the rest of a merge; the 100,000 events of the first
        beats need neither until a client reads them). The run object is never changed
        after this but for its heartbeat time and progress (the beat fast path), which the
        event keeps as they are now."""
        self.seq += 1
        at = run.heartbeat_at
        beat = {"id": run.id, "heartbeat_at": self._iso(at), "progress": run.progress}
        event = Event(self.seq, "run", None, run.id.partition("/")[0], run, beat, state=True)
        event.at, event.render = at, self._render_run
        self.log.append(event)
        self._notify(urgent=urgent)
        for listener in self.listeners:
            listener(event)
        return event

    def _notify(self, *, urgent: bool) -> None:
        """Wake the subscribers (``urgent``: a state event waits, flush it soon). Within a
        flush or a tick, once at its end: a storm of late runs woke every subscriber once
        per event (50 clients x thousands of events)."""
        if self._batching:
            self._pending_wake = max(self._pending_wake, 2 if urgent else 1)
            return
        for sub in self.subscribers:
            if urgent:
                sub.urgent = True
            sub.wake()

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching and self._pending_wake:
                urgent, self._pending_wake = self._pending_wake == 2, 0
                self._notify(urgent=urgent)

    def _iso(self, at: datetime | None) -> str | None:
        """``at.isoformat()``, once per datetime object: the beats of one frame share one
        time object, and the runs one tick turns late share its ``now``."""
        if at is None:
            return None
        known = self._isos.get(id(at))
        if known is not None and known[0] is at:
            return known[1]
        if len(self._isos) >= 256:
            self._isos.clear()
        iso = at.isoformat()
        self._isos[id(at)] = (at, iso)
        return iso

    def _publish_beat(self, run: Run, now: datetime) -> None:
        """A beat that changed only the heartbeat time and progress (no wake: the caller
        wakes the subscribers once per flush; listeners skip it, the state did not change)."""
        self.seq += 1
        at = run.heartbeat_at
        run_id = run.id
        event = Event(self.seq, "run", None, run_id.partition("/")[0], run,
                      {"id": run_id, "heartbeat_at": self._iso(at), "progress": run.progress})
        event.at, event.render = at, self._render_run
        self.log.append(event)

    def _render_run(self, run: Run, at: datetime | None, progress: float | None) -> bytes:
        return self.contract_bytes(run, self.clock(), at=at, progress=progress)

    def events_since(self, since: int) -> list[Event] | None:
        """Events after ``since``; None when the log no longer reaches back that far."""
        if since >= self.seq:
            return []
        if not self.log or self.log[0]["seq"] > since + 1:
            return None
        newer = self.seq - since
        return list(itertools.islice(reversed(self.log), newer))[::-1]

    def take(self, sub: Subscriber, limit: int = 20_000) -> list[Event] | None:
        """The next events for ``sub`` (at most ``limit``, its cursor moves past them), or
        None when it must be resynced from a snapshot (:func:`lag_decision`)."""
        first = self.log[0]["seq"] if self.log else None
        decision = lag_decision(sub.cursor, self.seq, first, self.max_lag)
        if decision == "current":
            return []
        if decision == "resync":
            return None
        newer = self.seq - sub.cursor
        events = list(itertools.islice(reversed(self.log), newer))[::-1][:limit]
        sub.cursor = events[-1].seq if events else self.seq
        return events

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

    def admitted_runs(self, flt: SubscriptionFilter | None = None) -> list[Run]:
        return self._admitted(flt)[0]

    def _admitted(self, flt: SubscriptionFilter | None
                  ) -> tuple[list[Run], list[Interrupt], list[BackendHealth]]:
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
            before = self._observed.get(run.id)
            view = self._observed[run.id] = AdapterView.of(run)
            if run.id in self.unknown:
                self._adopt(run.id)
            elif before is not None and before == view and self._same_rest(run):
                continue  # the adapter reports it unchanged; liveness has its own wheel
            self._refresh(run.id, now, base=run)
            merged = self.runs.get(run.id)
            if before is None and merged is not None and run.id not in self._contracts:
                # a run new to the index: its contract's rest is encoded now, at the poll,
                # not in the first snapshot after it (100,000 at once: seconds of the loop
                # while agents beat)
                self._static_contract(merged, now)
        for run_id in gone or []:
            self._forget_run(run_id)

    def _put_run(self, run: Run, old: Run | None = None) -> None:
        """The merged run changed: a new object (only the beat fast path changes one in
        place, and only its CONTRACT_DYNAMIC fields). ``old``: the version it replaces,
        when the two differ in CONTRACT_DYNAMIC fields at most: the cached contract stays."""
        self.runs[run.id] = run
        if old is None:
            self._contracts.pop(run.id, None)

    def _install(self, run: Run, old: Run | None = None) -> None:
        """A new merged version of a run: stored (:meth:`_put_run`), filed in the liveness
        wheel, and counted as terminal or not."""
        self._put_run(run, old)
        self._schedule(run)
        if run.state.terminal:
            self._terminal.add(run.id)
        else:
            self._terminal.discard(run.id)

    def contract_bytes(self, run: Run, now: datetime, *, at: Any = _AS_IS,
                       progress: Any = _AS_IS) -> bytes:
        """``encode(run.contract(now))`` (the same fields and values; the fields that move
        with the clock or the beats come last), cached between snapshots: the rest of a
        run's contract is encoded once per version of the run, not once per snapshot
        (100,000 contracts took seconds). ``at``, ``progress``: the run's heartbeat time and
        progress as of an event (the beat fast path changes them in place since)."""
        static = self._contracts.get(run.id) if self.runs.get(run.id) is run else None
        if static is None:
            static = self._static_contract(run, now)
        if (at is _AS_IS or at is run.heartbeat_at) and (
                progress is _AS_IS or progress == run.progress):
            at, progress, view = run.heartbeat_at, run.progress, run
        else:
            at = run.heartbeat_at if at is _AS_IS else at
            progress = run.progress if progress is _AS_IS else progress
            view = _copy_run(run, {"heartbeat_at": at, "progress": progress})
        suspected = view.suspected_state(now)
        return static + b"," + encode({
            "heartbeat_interval_s": run.heartbeat_interval_s,
            "heartbeat_timeout_s": run.heartbeat_timeout_s, "warnings": run.warnings,
            "heartbeat_at": self._iso(at), "progress": progress,
            "state": view.state.value, "updated_at": self._iso(view.updated_at),
            "heartbeat_age_s": view.heartbeat_age_s(now),
            "observed_age_s": view.observed_age_s(now),
            "suspected_state": suspected.value if suspected is not None else None,
        })[1:]

    def _static_contract(self, run: Run, now: datetime) -> bytes:
        """The encoded contract of ``run`` without its CONTRACT_DYNAMIC fields (and without
        its closing brace), cached while ``run`` is the indexed version."""
        data = run.contract(now)
        for key in CONTRACT_DYNAMIC:
            del data[key]
        static = encode(data)[:-1]
        if self.runs.get(run.id) is run:
            self._contracts[run.id] = static
        return static

    def _same_rest(self, run: Run) -> bool:
        """Does the merged run hold ``run``'s fields that the merge does not override?"""
        merged = self.runs.get(run.id)
        if merged is None:
            return False
        have = merged.__dict__
        return all(have.get(k) == v for k, v in run.__dict__.items() if k not in MERGED_FIELDS)

    def _forget_run(self, run_id: str) -> None:
        self._observed.pop(run_id, None)
        self._beats.pop(run_id, None)
        self._beat_seen.pop(run_id, None)
        self._bound.pop(run_id, None)
        self.unknown.pop(run_id)
        self.history.pop(run_id, None)
        self.release_checks.pop(run_id, None)
        self._unschedule(run_id)
        self._terminal.discard(run_id)
        self._contracts.pop(run_id, None)
        if self.runs.pop(run_id, None) is not None:
            self.publish("run_removed", {"id": run_id})

    def _merge(self, run_id: str, now: datetime, base: Run | None = None) -> Run | None:
        """The run as shown: the adapter's report (``base``, the run as the adapter just
        reported it, or else the merged run, whose other fields are the adapter's) with the
        agent's latest beat and the pending interrupts merged in."""
        observed = self._observed.get(run_id)
        base = base if base is not None else self.runs.get(run_id)
        if observed is None or base is None:
            return None
        beat = self._beats.get(run_id)
        update: dict[str, Any] = {
            "interrupts": sorted(self._pending_by_run.get(run_id, ())),
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
        merged = _copy_run(base, update)
        fields = merged.__dict__  # set directly: pydantic's setattr grows a set per run
        check = self.release_checks.get(run_id)
        if merged.state in (RunState.PAUSED, RunState.CANCELLED) and check is not None:
            # the backend already says so; the agent has not confirmed its release yet
            fields["state"] = (RunState.PAUSING if check.action == "pause"
                               else RunState.CANCELLING)
        else:
            fields["state"] = unified_state(merged, now)
        # every run of every backend: the adapter's own warnings, then the recoverability
        # warnings its facts imply (facts merged from the agent's beats included)
        fields["warnings"] = self._warnings(observed.warnings, merged)
        return merged

    def _warnings(self, reported: list[str], run: Run) -> list[str]:
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

    def _refresh(self, run_id: str, now: datetime, base: Run | None = None) -> None:
        merged = self._merge(run_id, now, base)
        if merged is None:
            return
        old = self.runs.get(run_id)
        if old is not None and old.state != merged.state:
            merged.__dict__["updated_at"] = now  # the unified state changed here
        elif old is not None and old.updated_at > merged.updated_at:
            merged.__dict__["updated_at"] = old.updated_at
        self._install(merged)
        if old is None or _differs(old, merged):
            self.publish_run(merged)

    def _beat_only(self, run_id: str, now: datetime) -> bool:
        """The fast path of a flush: when the latest beat changes nothing but the run's
        heartbeat time and progress (same state, cadence, resources, step; no release
        check), update the merged run in place and publish a beat event. False: the full
        merge is needed."""
        run = self.runs.get(run_id)
        beat = self._beats.get(run_id)
        observed = self._observed.get(run_id)
        if run is None or beat is None or observed is None or run_id in self.release_checks:
            return False
        # what _merge would set, field by field
        if ((beat.interval_s or observed.heartbeat_interval_s) != run.heartbeat_interval_s
                or (beat.timeout_s or observed.heartbeat_timeout_s) != run.heartbeat_timeout_s
                or beat.in_flight_step != run.in_flight_step
                or (beat.resources if beat.resources is not None
                    else observed.resources) != run.resources
                or (beat.progress is None and run.progress != observed.progress)):
            return False
        fields = run.__dict__
        at, state = fields["heartbeat_at"], fields["state"]
        fields["heartbeat_at"], fields["state"] = beat.at or now, observed.state
        try:
            new_state = unified_state(run, now)
        finally:
            fields["state"] = state
        if new_state is not state:
            fields["heartbeat_at"] = at
            return False
        if beat.progress is not None:
            fields["progress"] = beat.progress
        self._schedule(run)
        self._publish_beat(run, now)
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
        beat = self._beats.get(run_id)
        observed = self._observed.get(run_id)
        if run is None or beat is None or observed is None or run_id in self.release_checks:
            return False
        if beat.in_flight_step != run.in_flight_step or (
                beat.resources if beat.resources is not None
                else observed.resources) != run.resources:
            return False
        new = _copy_run(run, {
            "heartbeat_at": beat.at or now,
            "heartbeat_interval_s": beat.interval_s or observed.heartbeat_interval_s,
            "heartbeat_timeout_s": beat.timeout_s or observed.heartbeat_timeout_s,
            "progress": beat.progress if beat.progress is not None else observed.progress,
            "state": observed.state,
        })
        fields = new.__dict__
        fields["state"] = unified_state(new, now)
        if fields["heartbeat_timeout_s"] != run.heartbeat_timeout_s \
                or fields["state"].terminal or run.state.terminal:
            # else the facts the warnings come from are the run's: its warnings stay
            fields["warnings"] = self._warnings(observed.warnings, new)
        changed = fields["state"] is not run.state
        if changed:
            fields["updated_at"] = now  # the unified state changed here
        self._install(new, run)
        self.publish_run(new, urgent=changed)
        return True

    def _silence(self, run_id: str, run: Run, now: datetime, slot: int) -> bool:
        """Silence changed ``run``'s state (late, lost): nothing else changed since its last
        merge, so the merged run is the current one with the state the merge would judge
        now (from the adapter's state, as the merge does). False: the full merge is needed
        (a release check decides the state)."""
        observed = self._observed.get(run_id)
        if observed is None or run_id in self.release_checks:
            return False
        fields = run.__dict__
        state = fields["state"]
        fields["state"] = observed.state
        try:
            new_state = unified_state(run, now)
        finally:
            fields["state"] = state
        if new_state is state:
            self._schedule(run, not_before=slot + 1)
            return True
        new = _copy_run(run, {"state": new_state, "updated_at": now})
        if new_state.terminal or state.terminal:  # else the same facts, the same warnings
            new.__dict__["warnings"] = self._warnings(observed.warnings, new)
        self._install(new, run)
        self.publish_run(new)
        return True

    # ------------------------------------------------------------------ liveness wheel

    def _schedule(self, run: Run, not_before: int | None = None) -> None:
        """File ``run`` under the slot (100 ms) its silence could next change its state."""
        due = _liveness_due(run)
        if due is not None and not_before is not None and due < not_before:
            due = not_before  # judged at a fixed time (observed_at): look again later
        old = self._due_of.get(run.id)
        if old == due:
            return
        if old is not None:
            bucket = self._due.get(old)
            if bucket is not None:
                bucket.discard(run.id)
                if not bucket:
                    del self._due[old]
        if due is None:
            self._due_of.pop(run.id, None)
            return
        self._due_of[run.id] = due
        self._due.setdefault(due, set()).add(run.id)

    def _unschedule(self, run_id: str) -> None:
        old = self._due_of.pop(run_id, None)
        if old is not None and old in self._due:
            self._due[old].discard(run_id)
            if not self._due[old]:
                del self._due[old]

    def agent_heartbeat(self, run_id: str, beat: AgentHeartbeat,
                        reporter: Reporter | None = None, size: int = 0,
                        now: datetime | None = None) -> None:
        """Record a beat; the run event goes out at the next coalescing flush.

        Raises :class:`FrameError` ``bound_to_other`` when the run's beats come from another
        token that may not take it over yet. ``size``: the frame's bytes (for the bound on
        beats of unknown runs). ``now``: the hub's clock as the caller read it (the beats of
        one frame share it)."""
        now = now or self.clock()
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
        facts = BeatFacts(beat.seq, beat.at, beat.progress, beat.resources, beat.interval_s,
                          beat.timeout_s, beat.in_flight_step, beat.phase)
        self.beats_accepted += 1
        self._beats[run_id] = facts
        self._beat_seen[run_id] = now
        if owner is not None and bound is not owner:
            self._bound[run_id] = owner
        if len(self.history) < HISTORY_RUNS or run_id in self.history or self.focused:
            self._record(run_id, beat)
        if self.release_checks:
            self._verify_release(run_id, facts, reporter)
        self._dirty.add(run_id)

    def _record(self, run_id: str, beat: AgentHeartbeat) -> None:
        hist = self.history.get(run_id)
        if hist is None:
            if len(self.history) >= HISTORY_RUNS and run_id not in self.focused:
                return
            hist = self.history[run_id] = deque(maxlen=HEARTBEAT_HISTORY)
        hist.append((beat.at or self.clock(), beat.seq, beat.progress, beat.details,
                     beat.resources))

    def heartbeat_history(self, run_id: str) -> list[Heartbeat]:
        """The beats the agent pushed for ``run_id`` lately (oldest first; kept for the first
        HISTORY_RUNS runs to beat and for the runs clients opened: :meth:`focus`)."""
        # already validated as heartbeat frames: construct, do not validate again
        return [Heartbeat.model_construct(at=at, seq=seq, progress=progress, details=details,
                                          resources=resources)
                for at, seq, progress, details, resources in self.history.get(run_id, ())]

    def focus(self, run_ids: list[str]) -> None:
        """Clients opened these runs: keep their heartbeat history from now on."""
        for run_id in run_ids:
            self.focused[run_id] = None
            self.focused.move_to_end(run_id)
        while len(self.focused) > MAX_FOCUS:
            gone, _ = self.focused.popitem(last=False)
            if len(self.history) > HISTORY_RUNS:
                self.history.pop(gone, None)

    def _adopt(self, run_id: str) -> None:
        """A run an adapter now shows: its held beat (and binding) become the run's."""
        held = self.unknown.pop(run_id)
        if held is None:
            return
        self._beats[run_id] = BeatFacts.of(held.beat)
        if held.reporter is not None:
            self._bound[run_id] = held.reporter
        self._record(run_id, held.beat)

    def _may_take_over(self, run_id: str, last: AgentHeartbeat | BeatFacts | None,
                       now: datetime) -> bool:
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
        with self._batch():
            for run_id in dirty:
                if self._beat_only(run_id, now) or self._beat_merge(run_id, now):
                    self._pending_wake = self._pending_wake or 1
                else:
                    self._refresh(run_id, now)

    def tick(self) -> None:
        """Re-evaluate liveness of the runs whose deadline has come, and expire release
        checks, finished runs and old interrupts."""
        with self._batch():
            self._tick()

    def _tick(self) -> None:
        now = self.clock()
        slot = math.floor(now.timestamp() * WHEEL_SLOTS_PER_S)
        overdue = sorted(d for d in self._due if d <= slot)
        budget_end = time.perf_counter() + self.tick_budget_s
        judged = 0  # the budget is looked at every 64 runs
        self.liveness_backlog = 0
        for k, due in enumerate(overdue):
            bucket = list(self._due.pop(due))
            for n, run_id in enumerate(bucket):
                judged += 1
                if judged % 64 == 0 and time.perf_counter() > budget_end:
                    self._due.setdefault(due, set()).update(bucket[n:])  # the next tick's
                    self.liveness_backlog = sum(len(self._due.get(d, ())) for d in overdue[k:])
                    break
                self._due_of.pop(run_id, None)
                run = self.runs.get(run_id)
                if run is None:
                    continue
                # silence alone moves running -> late -> lost; refresh only where that happens
                if run.heartbeat_at is not None and unified_state(run, now) is not run.state:
                    if not self._silence(run_id, run, now, slot):
                        self._refresh(run_id, now)
                else:
                    self._schedule(run, not_before=slot + 1)
            if self.liveness_backlog:
                break
        for run_id in [r for r in self._terminal if r in self.runs
                       and now - self.runs[r].updated_at > FINISHED_RUN_TTL]:
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

    def _verify_release(self, run_id: str, beat: BeatFacts,
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
            self._beats[run_id] = beat._replace(resources=marked)
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
                    self._decided(intr, claim) if claim is not None and claim.status == "applied"
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
        new = self._decided(intr, claim)
        self._put_interrupt(new)
        self.publish("interrupt", new.contract())
        self._refresh(intr.run_id, self.clock())

    def _decided(self, intr: Interrupt, claim: Any) -> Interrupt:
        """``intr`` decided by ``claim``, shown with the journal's approvals as they stand: the
        last approver's is written with the claim, perhaps through a peer gateway whose news of
        it has not arrived here yet (a decided interrupt listing one approver of two)."""
        return self.interrupt_overlay(_as_decided(intr, claim))


def _as_decided(intr: Interrupt, claim: Any) -> Interrupt:
    return intr.model_copy(update={
        "status": "decided",
        "decision": DecisionRecord(kind=claim.kind, by=claim.identity, at=claim.at,
                                   command_id=claim.command_key),
    })


def _copy_run(run: Run, update: dict[str, Any]) -> Run:
    """``run.model_copy(update=update)`` without its cost in memory: the copy shares the
    original's set of explicitly set fields (the hub never dumps with exclude_unset)."""
    new = Run.__new__(Run)
    fields = dict(run.__dict__)
    fields.update(update)
    object.__setattr__(new, "__dict__", fields)
    object.__setattr__(new, "__pydantic_fields_set__", run.__pydantic_fields_set__)
    object.__setattr__(new, "__pydantic_extra__", run.__pydantic_extra__)
    object.__setattr__(new, "__pydantic_private__", run.__pydantic_private__)
    return new


def _differs(a: Run, b: Run) -> bool:
    """Do two versions of a run differ in anything but ``updated_at``? (field by field:
    a model_dump of each took most of a flush)"""
    fa, fb = a.__dict__, b.__dict__
    return any(fa[k] != fb[k] for k in fa if k != "updated_at")


def _liveness_due(run: Run) -> int | None:
    """The wheel slot (epoch tenths of a second) at which silence could next change
    ``run``'s state: late after the cadence plus a margin, lost after the timeout
    (console.liveness); None: never."""
    interval, at = run.heartbeat_interval_s, run.heartbeat_at
    if at is None or not interval or interval <= 0 or run.state not in LIVE_STATES:
        return None
    timeout = run.heartbeat_timeout_s
    lost_after = timeout if timeout and timeout > 0 else 5 * interval
    late_after = interval + late_margin(interval)
    after = late_after if run.state not in (RunState.LATE, RunState.LOST) else lost_after
    if run.state is RunState.LOST:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return math.floor((at.timestamp() + min(after, lost_after)) * WHEEL_SLOTS_PER_S)
