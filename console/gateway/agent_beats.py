"""What the gateway keeps of the beats agents push: the latest per run, who may report, history.

Each run's beats are bound to the token that first reported it (:class:`Reporter`); beats from
another token are refused until the bound one has been silent past its timeout or an
operator resumed the run (see SECURITY.md). Beats for runs no adapter knows are held in a
bounded store (:mod:`console.gateway.unknown_beats`) and adopted when the run appears. A beat
accepted here waits in ``dirty`` for the run store's next coalescing flush: a flood of beats
becomes at most one ``run`` event per run per window.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from console.gateway.protocol import AgentHeartbeat, FrameError
from console.gateway.unknown_beats import UnknownBeats
from console.model import Heartbeat, Resource
from console.semantics import beat_is_stale

if TYPE_CHECKING:
    from console.gateway.run_store import AdapterView

HEARTBEAT_HISTORY = 120
HISTORY_RUNS = 2_000  # runs whose recent beats are kept: the first to beat, and ...
MAX_FOCUS = 1_000  # ... the runs clients opened lately (least recently opened go first)
MAX_UNKNOWN_RUNS = 10_000  # runs no adapter knows whose latest beat is kept
MAX_UNKNOWN_BYTES = 16 << 20  # and the bytes of those beats' frames
DEFAULT_TAKEOVER_S = 60.0  # silence after which another token may take a run over (no timeout_s)


@dataclass(frozen=True)
class Reporter:
    """The token a beat came from: ``token_id`` binds, ``identity`` is for messages."""

    token_id: str
    identity: str


@dataclass
class HeldBeat:
    """The latest beat of a run no adapter shows yet, and the token it came from."""

    beat: AgentHeartbeat
    reporter: Reporter | None


class BeatFacts(NamedTuple):
    """What the gateway keeps of a run's latest agent beat (a tenth of the parsed frame)."""

    seq: int
    at: datetime | None
    progress: float | None
    resources: list[Resource] | None
    interval_s: float | None
    timeout_s: float | None
    in_flight_step: str | None
    phase: str
    #: when the gateway accepted the beat (None: held before an adapter showed the run);
    #: a field, not a dict of its own beside ``facts``: 52 bytes a run at 100,000 runs
    seen: datetime | None = None

    @staticmethod
    def of(beat: AgentHeartbeat, seen: datetime | None = None) -> BeatFacts:
        return BeatFacts(beat.seq, beat.at, beat.progress, beat.resources, beat.interval_s,
                         beat.timeout_s, beat.in_flight_step, beat.phase, seen)


#: one beat in a run's history: at, seq, progress, details, resources (a tuple: a model per
#: beat cost more than the rest of a beat's handling)
BeatRecord = tuple[datetime, int, float | None, dict[str, Any], list[Resource] | None]


class AgentBeats:
    """The agents' side of every run: ``observed`` (the run store's index of what adapters
    reported, read only) says which runs are known; beats of the others are held."""

    def __init__(self, observed: Mapping[str, AdapterView],
                 clock: Callable[[], datetime]) -> None:
        self.observed = observed
        self.clock = clock
        self.facts: dict[str, BeatFacts] = {}  # latest agent beat per known run id
        self.bound: dict[str, Reporter] = {}  # known run id -> the token its beats come from
        self.unknown: UnknownBeats[HeldBeat] = UnknownBeats(
            max_runs=MAX_UNKNOWN_RUNS, max_bytes=MAX_UNKNOWN_BYTES)
        #: recent beats of the first HISTORY_RUNS runs to beat and of the focused runs
        self.history: dict[str, deque[BeatRecord]] = {}
        self.focused: OrderedDict[str, None] = OrderedDict()  # runs clients opened lately
        #: runs with a beat the next flush merges, in the order their beats came (a dict: the
        #: flush then reads the index's runs in about the order it last wrote them, not in
        #: hash order; at 100,000 runs half a flush's time was waiting for memory)
        self.dirty: dict[str, None] = {}
        self.stale_beats = 0  # beats ignored because a newer one was already accepted
        self.beats_accepted = 0  # beats merged into known runs
        self.takeovers = 0  # runs whose binding moved to another token

    def accept(self, run_id: str, beat: AgentHeartbeat, reporter: Reporter | None,
               size: int, now: datetime) -> BeatFacts | None:
        """Record a beat: the facts kept of it for a known run (None: stale, or held for a
        run no adapter shows yet). Raises :class:`FrameError` ``bound_to_other`` when the
        run's beats come from another token that may not take it over yet."""
        view = self.observed.get(run_id)
        known = view is not None
        held = None if known else self.unknown.get(run_id)
        last = self.facts.get(run_id) if known else (held.beat if held else None)
        bound = self.bound.get(run_id) if known else (held.reporter if held else None)
        if reporter is not None and bound is not None and bound.token_id != reporter.token_id:
            if not self.may_take_over(run_id, last, now):
                raise FrameError(
                    "bound_to_other",
                    f"{run_id} reports through another agent token; a different token may "
                    "take it over only after that one fell silent past its timeout or an "
                    "operator resumed the run")
            self.takeovers += 1
            last = None  # the new worker's counter starts afresh
        if last is not None and beat_is_stale(beat.seq, beat.at, last.seq, last.at):
            self.stale_beats += 1  # built before the beat we have; would undo its report
            return None
        beat = beat if beat.at else beat.model_copy(update={"at": now})
        owner = reporter if reporter is not None else bound
        if not known:
            self.unknown.put(run_id, HeldBeat(beat, owner), size or 512)
            return None
        facts = BeatFacts(beat.seq, beat.at, beat.progress, beat.resources, beat.interval_s,
                          beat.timeout_s, beat.in_flight_step, beat.phase, now)
        if last is None and view is not None:
            run_id = view.id  # filed under the index's string, not the frame's copy of it
        self.beats_accepted += 1
        self.facts[run_id] = facts
        if owner is not None and bound is not owner:
            self.bound[run_id] = owner
        if run_id in self.history or len(self.history) < HISTORY_RUNS or run_id in self.focused:
            self.record(run_id, beat.at, beat.seq, beat.progress, beat.details, beat.resources)
        self.dirty[run_id] = None
        return facts

    def record(self, run_id: str, at: datetime | None, seq: int, progress: float | None,
               details: dict[str, Any], resources: list[Resource] | None) -> None:
        """Keep a beat in ``run_id``'s history, if the run has one or may have one."""
        hist = self.history.get(run_id)
        if hist is None:
            if len(self.history) >= HISTORY_RUNS and run_id not in self.focused:
                return
            hist = self.history[run_id] = deque(maxlen=HEARTBEAT_HISTORY)
        hist.append((at or self.clock(), seq, progress, details, resources))

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

    def adopt(self, run_id: str) -> None:
        """A run an adapter now shows: its held beat (and binding) become the run's."""
        held = self.unknown.pop(run_id)
        if held is None:
            return
        self.facts[run_id] = BeatFacts.of(held.beat)
        if held.reporter is not None:
            self.bound[run_id] = held.reporter
        beat = held.beat
        self.record(run_id, beat.at, beat.seq, beat.progress, beat.details, beat.resources)

    def may_take_over(self, run_id: str, last: AgentHeartbeat | BeatFacts | None,
                      now: datetime) -> bool:
        """Another token may report for a run once its bound token has been silent longer
        than the run's timeout (the worker died; a sibling resumed it)."""
        if last is None or last.at is None:
            return True
        run = self.observed.get(run_id)
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
        last = self.facts.get(run_id) if run_id in self.observed else (
            held.beat if held else None)
        if not self.may_take_over(run_id, last, self.clock()):
            raise FrameError("bound_to_other", f"{run_id} reports through another agent token")

    def unbind(self, run_id: str) -> None:
        """An operator resumed the run: whichever worker of its scope picks it up reports."""
        self.bound.pop(run_id, None)

    def bound_to(self, run_id: str) -> Reporter | None:
        if run_id in self.observed:
            return self.bound.get(run_id)
        held = self.unknown.get(run_id)
        return held.reporter if held else None

    def take_dirty(self) -> dict[str, None]:
        """The runs beaten since the last flush, in that order (and none from now on)."""
        dirty, self.dirty = self.dirty, {}
        return dirty

    def forget(self, run_id: str) -> None:
        self.facts.pop(run_id, None)
        self.bound.pop(run_id, None)
        self.unknown.pop(run_id)
        self.history.pop(run_id, None)
