"""The hand path of a heartbeats frame: a plain beat of a run that already beats through
the same connection is checked and taken in one pass over the decoded item.

At 20,000 beats/s nearly every beat is the same shape as the run's previous one: plain
fields (strings within their caps, numbers in range, an ISO-8601 time), no resources held or
the same ones as its last beat (a GPU held for the whole run), a run the index knows, bound
to the token that sends it through the same connection, and no release check waiting. For
such a beat the general path built a model (beat_validation.py), checked it against the
token and the clock (beat_checks.py) and accepted it (agent_beats.py): three calls and two
objects for what is, here, a dozen comparisons and one ``BeatFacts`` (and the beat in the
run's history, if it keeps one). Any other item (another shape, a first beat, a beat from
another token, one that may be stale, one a release check waits for, one that is refused)
goes the general way, in its turn (``slow``), so a frame's beats are taken in their order
and every refusal keeps its message; the facts kept are those the general path keeps
(tests/unit/test_plain_beats.py holds the two paths to that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from console.gateway.agent_beats import HISTORY_RUNS, AgentBeats, BeatFacts, Reporter
from console.gateway.agent_heartbeat import (
    MAX_BACKEND,
    MAX_CONTEXT,
    MAX_INTERVAL_S,
    MAX_NAME,
    MAX_SEQ,
    MAX_TIMEOUT_S,
    PHASES,
)
from console.gateway.beat_checks import ahead_of_clock
from console.gateway.beat_validation import FAST_FIELDS, iso_time
from console.gateway.protocol import FrameError

if TYPE_CHECKING:
    from console.gateway.auth import Principal
    from console.model import Resource

#: the fields a plain beat may carry: those of beat_validation's hand path (``resources``:
#: empty, as irq's own helper sends it with every beat, or here also the run's last beat's
#: resources again, field for field; other resources go the general path, each one a model)
PLAIN_FIELDS = FAST_FIELDS
_PHASES = frozenset(PHASES)
_NOT_PLAIN = ("", "", "", False)  # a backend/context pair the general path answers for

#: the general path of one item of the frame: ``slow(index, item)``
Slow = Callable[[int, Any], None]
#: the ``backend:context`` key a beat's backend and context name (FrameError: none)
KeyOf = Callable[[str, "str | None"], str]


def plain_time(text: str, now: datetime) -> datetime | None:
    """A beat's ``at`` as the general path accepts it (aware; a naive time is UTC), when
    plainly ISO-8601 and not too far ahead of the gateway's clock; None: not plain."""
    at = iso_time(text)
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return None if ahead_of_clock(at, now) else at


class PlainBeats:
    """Takes the plain beats of a frame into ``beats`` (AgentBeats); ``checks``: the runs
    whose release check waits for a beat (those beats go the general path)."""

    def __init__(self, beats: AgentBeats, checks: Mapping[str, object]) -> None:
        self.beats = beats
        self.checks = checks
        self.taken = 0  # beats taken by hand since start

    def take(self, items: list[Any], who: Principal, reporter: Reporter, now: datetime,
             key_of: KeyOf, slow: Slow) -> int:
        """Each item of a heartbeats frame, in order: taken here when plain, else given to
        ``slow``. Returns how many were taken here."""
        beats = self.beats
        facts, bound_of, history, focused = beats.facts, beats.bound, beats.history, beats.focused
        checks, dirty, record = self.checks, beats.dirty, beats.record
        keys: dict[tuple[str, str | None], tuple[str, str, str, bool]] = {}
        times: dict[str, datetime | None] = {}
        taken = 0
        for i, item in enumerate(items):
            if type(item) is not dict or not item.keys() <= PLAIN_FIELDS:
                slow(i, item)
                continue
            get = item.get
            backend, context, native_id = get("backend"), get("context"), get("native_id")
            if (type(backend) is not str or type(native_id) is not str
                    or not 0 < len(native_id) <= MAX_NAME
                    or (context is not None and type(context) is not str)):
                slow(i, item)
                continue
            pair = (backend, context)
            named = keys.get(pair)
            if named is None:
                named = keys[pair] = _key(backend, context, key_of, who)
            prefix = named[0]
            if not prefix or not (named[3] or who.may_report(named[1], named[2], native_id)):
                slow(i, item)
                continue
            kind, seq, text = get("type"), get("seq", 0), get("at")
            if (kind is not None and kind != "heartbeat") or type(seq) is not int \
                    or not 0 <= seq <= MAX_SEQ or type(text) is not str:
                slow(i, item)
                continue
            at = times.get(text)
            if at is None:
                at = times[text] = None if text in times else plain_time(text, now)
                if at is None:
                    slow(i, item)
                    continue
            progress, interval, timeout = get("progress"), get("interval_s"), get("timeout_s")
            step, phase, details = get("in_flight_step"), get("phase", "running"), get(
                "details", _EMPTY)
            resources = get("resources")
            if ((progress is not None
                 and not (type(progress) is float and 0.0 <= progress <= 1.0))
                    or (interval is not None and not (
                        type(interval) is float and 0.0 < interval <= MAX_INTERVAL_S))
                    or (timeout is not None and not (
                        type(timeout) is float and 0.0 < timeout <= MAX_TIMEOUT_S))
                    or (step is not None and (type(step) is not str or len(step) > MAX_NAME))
                    or type(phase) is not str or phase not in _PHASES
                    or (details is not _EMPTY and (
                        type(details) is not dict
                        or not all(type(k) is str for k in details)))
                    or (resources is not None and type(resources) is not list)):
                slow(i, item)
                continue
            run_id = prefix + native_id
            last = facts.get(run_id)  # facts are kept only for runs the index knows
            if (last is None or bound_of.get(run_id) is not reporter or seq < last.seq
                    or run_id in checks):
                slow(i, item)  # a first beat, a binding, maybe stale, a release checked
                continue
            if resources:
                held = last.resources
                if not held or not same_resources(resources, held):
                    slow(i, item)  # other resources than its last beat's: new models
                    continue
                resources = list(held)  # its own list, as the model would make it
            elif resources is not None:
                resources = []
            facts[run_id] = BeatFacts(seq, at, progress, resources, interval, timeout, step,
                                      phase, now)
            if run_id in history or len(history) < HISTORY_RUNS or run_id in focused:
                record(run_id, at, seq, progress,
                       {} if details is _EMPTY else dict(details), resources)
            dirty[run_id] = None
            taken += 1
        beats.beats_accepted += taken
        self.taken += taken
        return taken


_EMPTY: dict[str, Any] = {}


def same_resources(raw: list[Any], held: list[Resource]) -> bool:
    """Does ``raw`` (a beat's resources as decoded) say what ``held`` (its run's last beat's
    resources, as models) says, field for field? Each item must set the fields its model
    was given (no more, no fewer: a field left out is its default, which the model may not
    hold) to the values the model holds; then the model built of it would equal it."""
    if len(raw) != len(held):
        return False
    for item, model in zip(raw, held, strict=True):
        if type(item) is not dict or item.keys() != model.model_fields_set \
                or not item.items() <= model.__dict__.items():
            return False
    return True


def _key(backend: str, context: str | None, key_of: KeyOf,
         who: Principal) -> tuple[str, str, str, bool]:
    """The run id prefix of a backend and context, the backend and context its key names
    (for the token's scope) and whether the token may report for every run there (an
    unscoped agent token); ``_NOT_PLAIN`` when the general path must answer."""
    if not 0 < len(backend) <= MAX_BACKEND or (context is not None
                                              and len(context) > MAX_CONTEXT):
        return _NOT_PLAIN
    try:
        key = key_of(backend, context)
    except FrameError:
        return _NOT_PLAIN
    name, _, ctx = key.partition(":")
    return key + "/", name, ctx, who.scopes is None and who.may_report(name, ctx, "")
