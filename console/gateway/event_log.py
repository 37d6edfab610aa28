"""The gateway's event log and fan-out: sequence numbers, subscribers, one encoding per event.

Every change becomes an event with a monotonically increasing sequence number, kept in a
bounded log so a reconnecting client resumes from its last number. Events are encoded once,
lazily, for all clients (:class:`Event`); subscribers are cursors into the log, not queues of
their own, so a slow client costs no memory beyond the log: when its cursor falls more than
``max_lag`` events behind (or off the log), the server resyncs it from a snapshot
(:func:`lag_decision`). A beat that changes nothing but the run's heartbeat time and progress
becomes a ``run`` event whose full form is rendered only when a client asks for it; clients
that asked for compact beats get ``beat`` events.

The log is fed (by the run store, the interrupt store, the gateway) and calls nobody back but
the subscribers' wake-ups and the listeners (webhooks, peering), which must not block.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import sys
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

import orjson

from console.gateway.beat_shedding import PublishMarks
from console.gateway.protocol import SubscriptionFilter, encode
from console.run_record import RunRecord

MAX_LAG = 100_000  # events a subscriber may fall behind before it is resynced (the log's
# default size: a client is resynced when the log no longer reaches back to its cursor)

#: renders a run's contract as of an event: the run, its heartbeat time and progress then
RunRenderer = Callable[[RunRecord, datetime | None, float | None], bytes]


#: beat times written as text lately: id -> (the time, its text, its JSON) (_written)
_iso_texts: dict[int, tuple[datetime, str, bytes]] = {}
_BEAT = b'{"seq":%d,"kind":"beat","data":{"id":%b,"heartbeat_at":%b,"progress":%b}}'


def _written(at: datetime) -> tuple[datetime, str, bytes]:
    """``at``, its ISO text and that text as JSON. The beats of a frame share their time
    (plain_beats.py) and a flush takes runs in no order: the last few hundred times are
    kept, by the time object itself."""
    known = _iso_texts.get(id(at))
    if known is None or known[0] is not at:
        if len(_iso_texts) >= 512:
            _iso_texts.clear()
        text = at.isoformat()
        known = _iso_texts[id(at)] = (at, text, orjson.dumps(text))
    return known


class Event(dict[str, Any]):
    """One logged event, ``{"seq", "kind", "data"}``, with its encodings made once for
    every client: a :class:`StateEvent` (its data given), a :class:`RunEvent` (a new version
    of a run) or a heartbeat-only :class:`BeatEvent`."""

    __slots__ = ()

    @property
    def seq(self) -> int:
        return int(self["seq"])

    @property
    def scope(self) -> str | None:
        """The ``BACKEND:CONTEXT`` the event is about (None: no context)."""
        raise NotImplementedError

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def full(self) -> bytes:
        """The event as every client without compact beats gets it."""
        raise NotImplementedError

    def compact(self) -> bytes:
        """The event for a client with compact beats: a beat as a ``beat`` event
        (:class:`BeatEvent`), any other event as :meth:`full`."""
        return self.full()


class StateEvent(Event):
    """A published event with its data (an interrupt, a notice, an audit entry...): kept as
    its encoding once encoded, ``event["data"]`` decodes it again."""

    __slots__ = ("scope", "_full")

    def __init__(self, seq: int, kind: str, data: dict[str, Any], scope: str | None) -> None:
        super().__init__(seq=seq, kind=kind, data=data)
        self.scope = scope  # type: ignore[misc]  # a slot where the base has a property
        self._full: bytes | None = None

    def __missing__(self, key: str) -> Any:
        if key == "data" and self._full is not None:  # dropped once encoded (see full())
            return orjson.loads(self._full)["data"]
        raise KeyError(key)

    def full(self) -> bytes:
        if self._full is None:
            self._full = encode({"seq": self["seq"], "kind": self["kind"], "data": self["data"]})
            # the log keeps the encoding, not the objects too (data in memory is ~3x its
            # JSON); ``event["data"]`` decodes it again
            dict.pop(self, "data", None)
        return self._full


class _RunVersion(Event):
    """A ``run`` event that holds no dict entries: its sequence number, the run version it
    is about and that version's heartbeat time and progress as of the event live in slots;
    its full form (the run contract) is rendered from them when first asked for, by the run
    store's renderer (run_contracts.py: cached between events and snapshots)."""

    __slots__ = ("_seq", "run_ref", "at", "progress", "render", "_full")

    def __init__(self, seq: int, run: RunRecord, at: datetime | None,
                 progress: float | None, render: RunRenderer) -> None:
        # no dict.__init__: "seq", "kind" and "data" are answered by __getitem__
        self._seq, self.at, self.progress, self.render = seq, at, progress, render
        self.run_ref: RunRecord | None = run
        self._full: bytes | None = None

    @property
    def seq(self) -> int:
        return self._seq

    def __getitem__(self, key: str) -> Any:
        if key == "seq":
            return self._seq
        if key == "kind":
            return "run"
        if key == "data":
            if self.run_ref is None:  # let go once encoded (RunEvent.full)
                return orjson.loads(self.full())["data"]
            data = self.run_ref.contract()
            data["heartbeat_at"], data["progress"] = self._iso(), self.progress
            return data
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in ("seq", "kind", "data")

    def _iso(self) -> str | None:
        return None if self.at is None else _written(self.at)[1]

    def full(self) -> bytes:
        if self._full is None:
            assert self.run_ref is not None
            self._full = (b'{"seq":' + str(self._seq).encode() + b',"kind":"run","data":'
                          + self.render(self.run_ref, self.at, self.progress) + b"}")
        return self._full


class RunEvent(_RunVersion):
    """A new version of a run (:meth:`EventLog.publish_run`: its state, cadence or
    warnings changed): every client gets its full form. 120 bytes where an event dict and
    its beat dict were ~450: 100,000 runs found by a first poll publish 100,000 of them.
    Once encoded it keeps the encoding and lets the run version go (the index may have
    replaced it since)."""

    __slots__ = ("scope",)

    def __init__(self, seq: int, run: RunRecord, at: datetime | None,
                 progress: float | None, render: RunRenderer) -> None:
        super().__init__(seq, run, at, progress, render)
        self.scope = _scope_of(run.id)  # type: ignore[misc]  # a slot for the base's property

    def full(self) -> bytes:
        encoded = super().full()
        self.run_ref = None
        return encoded


class BeatEvent(_RunVersion):
    """A heartbeat-only event (:meth:`EventLog.publish_beat`): a beat that changed nothing
    but the run's heartbeat time and progress. Seven slots (the context and the time's text
    derived when asked for): 120 bytes, the log at 20,000 beats/s holds 100,000 of them. Its
    forms are rendered when first asked for and dropped again once every client has been
    sent it (:meth:`release`)."""

    __slots__ = ("_compact",)

    def __init__(self, seq: int, run: RunRecord, at: datetime | None,
                 progress: float | None, render: RunRenderer) -> None:
        super().__init__(seq, run, at, progress, render)
        self._compact: bytes | None = None

    @property
    def scope(self) -> str:
        assert self.run_ref is not None
        return _scope_of(self.run_ref.id)

    def compact(self) -> bytes:
        if self._compact is None:
            assert self.run_ref is not None
            # what encode() makes of the event's dict, written into a template (a third of
            # the time: 20,000 a second); tests/unit/test_gateway_fast_path.py holds the two
            at = b"null" if self.at is None else _written(self.at)[2]
            self._compact = _BEAT % (self._seq, orjson.dumps(self.run_ref.id), at,
                                     orjson.dumps(self.progress))
        return self._compact

    def release(self) -> None:
        """Drop its encodings (made again if a client asks for it after all)."""
        self._compact = self._full = None


@dataclass(eq=False)
class Subscriber:
    """A connected client: a cursor into the event log; the server flushes in batches."""

    wake: Callable[[], None]
    cursor: int = 0  # the last seq this client was sent (or covered by its snapshot)
    filter: SubscriptionFilter | None = None
    compact_beats: bool = False
    urgent: bool = False  # a state event (not a beat) waits: flush soon
    resyncs: int = 0  # snapshots sent because the client fell behind
    shedding: bool = False  # behind: sent state changes only (beat_shedding.py)
    shed_until: float = 0.0  # shedding at least until then (monotonic)


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
    if kind == "alert":  # of no context when it names none
        return f"{data['backend']}:{data['context']}" if data.get("backend") else None
    ref = data.get("run_id") if kind in ("interrupt", "notice", "obligation") else (
        data.get("target") if kind == "audit" else data.get("id"))
    if kind == "interrupt_removed":
        ref = data.get("id")
    if not isinstance(ref, str) or "/" not in ref:
        return None
    head = ref.split("/", 1)[0]
    return head if ":" in head else None


def _scope_of(run_id: str) -> str:
    """A run event's scope, one string per context (the log's 100,000 events held 100,000
    copies of a handful of strings)."""
    return sys.intern(run_id.partition("/")[0])


class EventLog:
    """The bounded log of published events and the subscribers reading it."""

    def __init__(self, *, size: int = 100_000, max_lag: int = MAX_LAG) -> None:
        self.epoch = uuid.uuid4().hex[:12]
        self.seq = 0
        self.log: deque[dict[str, Any]] = deque(maxlen=size)
        self.subscribers: set[Subscriber] = set()
        self.max_lag = max_lag
        #: called with every published event but beats (the webhooks classify; they must
        #: not block)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._batching = 0  # inside a flush or tick: subscribers are woken at its end
        self._pending_wake = 0  # 1: beats wait, 2: a state event waits
        self.marks = PublishMarks()  # when the log reached which seq (backlogs in seconds)
        #: the seqs of the logged events that are not heartbeat-only (ascending): a client
        #: that is behind is sent these and shed markers for the rest (take_states)
        self.state_seqs: list[int] = []
        self._released_upto = 0  # beat events up to this seq hold no encodings (see below)

    def release_encodings(self) -> int:
        """Drop the encodings of the heartbeat-only events every subscriber has been sent
        (a client that asks for one later, a replay, gets it made again). At 20,000 beats/s
        the log's 100,000 compact forms were 16 MB, and the full forms a client without
        compact beats reads (``irq watch``) ~80 MB. Returns how many were dropped."""
        upto = min((sub.cursor for sub in self.subscribers), default=self.seq)
        done, released = self._released_upto, 0
        for event in reversed(self.log):
            seq = event.seq
            if seq <= done:
                break
            if seq <= upto and type(event) is BeatEvent:
                event.release()
                released += 1
        self._released_upto = max(done, upto)
        return released

    def publish(self, kind: str, data: dict[str, Any]) -> Event:
        self.seq += 1
        event = StateEvent(self.seq, kind, data, event_scope(kind, data))
        self.log.append(event)
        self._state_logged()
        self._notify(urgent=True)
        for listener in self.listeners:
            listener(event)
        event.full()  # encoded now, and only the encoding stays in the log
        return event

    def publish_run(self, run: RunRecord, render: RunRenderer, *, urgent: bool = True) -> Event:
        """A ``run`` event rendered from ``run`` (by ``render``) when first asked for (a run's
        contract and its encoding cost more than the rest of a merge; the 100,000 events of
        the first beats need neither until a client reads them). The run object is never
        changed after this but for its heartbeat time and progress (the beat fast path),
        which the event keeps as they are now."""
        self.seq += 1
        event = RunEvent(self.seq, run, run.heartbeat_at, run.progress, render)
        self.log.append(event)
        self._state_logged()
        self._notify(urgent=urgent)
        for listener in self.listeners:
            listener(event)
        return event

    def publish_beat(self, run: RunRecord, render: RunRenderer) -> None:
        """A beat that changed only the heartbeat time and progress (no wake: the caller
        wakes the subscribers once per flush, :meth:`beats_wait`; listeners skip it, the
        state did not change)."""
        self.seq += 1
        self.log.append(BeatEvent(self.seq, run, run.heartbeat_at, run.progress, render))

    def _state_logged(self) -> None:
        states = self.state_seqs
        states.append(self.seq)
        if len(states) > (self.log.maxlen or 0) + 4096:  # older than the log: dropped
            del states[:bisect.bisect_left(states, self.log[0]["seq"])]

    def take_states(self, sub: Subscriber, limit: int = 20_000
                    ) -> tuple[int, int, list[Event]] | None:
        """For a client that is behind (beat_shedding.py): the events after its cursor that
        are not heartbeat-only (at most ``limit``), as ``(first, last, events)``: the range
        ``first..last`` they were taken from; its cursor moves to ``last``. Costs what those
        events cost, not the beats between them. None: resync (:func:`lag_decision`)."""
        first_logged = self.log[0]["seq"] if self.log else None
        decision = lag_decision(sub.cursor, self.seq, first_logged, self.max_lag)
        if decision == "current":
            return sub.cursor + 1, sub.cursor, []
        if decision == "resync" or first_logged is None:
            return None
        states = self.state_seqs
        i = bisect.bisect_right(states, sub.cursor)
        picked = states[i:i + limit]
        last = self.seq if len(picked) < limit else picked[-1]
        log = self.log
        events = [cast(Event, log[s - first_logged]) for s in picked]
        first, sub.cursor = sub.cursor + 1, last
        return first, last, events

    def beats_wait(self) -> None:
        """Beat events were logged inside a batch: wake the subscribers at its end."""
        self._pending_wake = self._pending_wake or 1

    def _notify(self, *, urgent: bool) -> None:
        """Wake the subscribers (``urgent``: a state event waits, flush it soon). Within a
        flush or a tick, once at its end: a storm of late runs woke every subscriber once
        per event (50 clients x thousands of events)."""
        if self._batching:
            self._pending_wake = max(self._pending_wake, 2 if urgent else 1)
            return
        self.marks.note(self.seq)
        for sub in self.subscribers:
            if urgent:
                sub.urgent = True
            sub.wake()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Publish many events, wake the subscribers once at the end."""
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching and self._pending_wake:
                urgent, self._pending_wake = self._pending_wake == 2, 0
                self._notify(urgent=urgent)

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
