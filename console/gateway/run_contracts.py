"""Runs' contracts encoded for the wire, the rest of each cached between snapshots and events.

A run's contract is encoded once per version of the run, not once per snapshot (100,000
contracts took seconds): the fields that move with the clock or the agent's beats
(:data:`CONTRACT_DYNAMIC`) are encoded each time and come last, the rest is cached while the
run object is the indexed version.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from console.gateway.protocol import encode
from console.gateway.shared_values import share_empties, shared_bytes
from console.liveness import live_for
from console.model import RunState
from console.run_record import RunFacts, RunRecord

#: fields of a run's contract that change without a new run object (the beat fast path),
#: with the time, or with what an agent's beats change (its cadence and timeout, the state,
#: the warnings those imply): the cached rest of a contract outlives such changes, so a
#: fleet's first beats do not void the contracts cached at its first poll
CONTRACT_DYNAMIC = ("heartbeat_at", "progress", "heartbeat_age_s", "observed_age_s",
                    "suspected_state", "state", "updated_at", "heartbeat_interval_s",
                    "heartbeat_timeout_s", "warnings")

#: the fields of a run's contract that name the run, cached per run; the rest of its static
#: part is the same bytes for many runs (kept once)
CONTRACT_OWN = ("id", "native_id", "started_at")

AS_IS: Any = object()  # ContractCache.encoded: the run's own value


class ContractCache:
    """The encoded contracts of the runs in ``runs`` (the run store's index, read only)."""

    def __init__(self, runs: dict[str, RunRecord], *, clock: Callable[[], datetime]) -> None:
        self.runs = runs
        self.clock = clock
        #: run id -> its contract encoded without the fields that change in place or with
        #: the time (CONTRACT_DYNAMIC) and without those that name it (CONTRACT_OWN): bytes
        #: many runs share (:meth:`encode_static`); dropped when the run object is replaced
        self.static: dict[str, bytes] = {}

    def render(self, run: RunRecord, at: datetime | None, progress: float | None) -> bytes:
        """A ``run`` event's full form (event_log.RunRenderer)."""
        return self.encoded(run, self.clock(), at=at, progress=progress)

    def encoded(self, run: RunRecord, now: datetime, *, at: Any = AS_IS,
                progress: Any = AS_IS) -> bytes:
        """``encode(run.contract(now))`` (the same fields and values; the fields that name
        the run first, those that move with the clock or the beats last), its rest cached.
        ``at``, ``progress``: the run's heartbeat time and progress as of an event (the beat
        fast path changes them in place since)."""
        rest = self.static.get(run.id) if self.runs.get(run.id) is run else None
        if rest is None:
            rest = self.encode_static(run, now)
        if not ((at is AS_IS or at is run.heartbeat_at)
                and (progress is AS_IS or progress == run.progress)):
            run = copy_run(run, {  # the run as of the event
                "heartbeat_at": run.heartbeat_at if at is AS_IS else at,
                "progress": run.progress if progress is AS_IS else progress})
        # one join: a snapshot does this 100,000 times
        return b"".join((_own(run), b",", rest, _dynamic_tail(run, now)))

    def encode_static(self, run: RunRecord, now: datetime) -> bytes:
        """The encoded contract of ``run`` without its CONTRACT_OWN and CONTRACT_DYNAMIC
        fields (and without braces): the same bytes for many runs, kept once
        (shared_values.py; the own fields cached per run were 190 bytes of each of
        100,000 runs, encoding them anew costs a snapshot ~50 ms); cached while ``run`` is
        the indexed version."""
        data = run.contract(now)
        for key in (*CONTRACT_DYNAMIC, *CONTRACT_OWN):
            del data[key]
        rest = shared_bytes(encode(data)[1:-1])
        if self.runs.get(run.id) is run:
            self.static[run.id] = rest
        return rest

    def drop(self, run_id: str) -> None:
        self.static.pop(run_id, None)


def _own(run: RunRecord) -> bytes:
    """The CONTRACT_OWN fields of ``run``, encoded as the contract has them (an open brace
    first, no closing one; orjson writes a datetime as ``isoformat()``)."""
    return orjson.dumps({"id": run.id, "native_id": run.native_id,
                         "started_at": run.started_at})[:-1]


def _dynamic_tail(run: RunRecord, now: datetime) -> bytes:
    """The CONTRACT_DYNAMIC fields of ``run``, as :meth:`ContractCache.encoded` appends them
    (the values ``Run.contract`` gives), read off the run's fields directly: a snapshot of
    100,000 runs spent most of its time here. Times go to orjson as datetimes: it writes
    exactly ``isoformat()`` in C (formatting each in Python, through a cache that
    ``updated_at`` -- one time per run -- kept missing, was a third of the snapshot)."""
    at, seen, state = run.heartbeat_at, run.observed_at, run.state
    interval, timeout = run.heartbeat_interval_s, run.heartbeat_timeout_s
    age = None if at is None else max(0.0, (now - at).total_seconds())
    if age is None or state not in _JUDGED:
        suspected = None  # Run.suspected_state's first two checks
    elif interval and interval > 0 and age <= live_for(interval, timeout):
        suspected = None  # classify_liveness: "running" (most runs, most of the time)
    else:
        suspected = run.suspected_state(now)
    return b"," + orjson.dumps({
        "heartbeat_interval_s": interval, "heartbeat_timeout_s": timeout,
        "warnings": run.warnings, "heartbeat_at": at, "progress": run.progress,
        "state": state.value, "updated_at": run.updated_at,
        # age_seconds, inlined
        "heartbeat_age_s": None if age is None else round(age, 3),
        "observed_age_s": None if seen is None
        else max(0.0, round((now - seen).total_seconds(), 3)),
        "suspected_state": suspected.value if suspected is not None else None,
    })[1:]


#: the states Run.suspected_state judges from the heartbeat's age
_JUDGED = frozenset({RunState.RUNNING, RunState.WAITING, RunState.LATE})


def copy_run(run: RunFacts, update: dict[str, Any]) -> RunRecord:
    """A new version of an indexed run (run_record.py): ``run`` -- as its adapter reported it,
    or the indexed version -- with ``update``'s fields, its empty containers the shared ones
    (shared_values.py)."""
    new = run.replace(update) if isinstance(run, RunRecord) else RunRecord.of(run, update)
    share_empties(new)
    return new
