"""Validation of the beats of a batched ``heartbeats`` frame, by hand where it is plain.

pydantic took a tenth of the gateway's time at 20,000 beats/s. A beat whose fields are all of
the plain kind agents send (strings within their caps, a finite number in range, an ISO-8601
time ``YYYY-MM-DDTHH:MM:SS[.ffffff][Z|±HH:MM]``, no resources held) is checked here field by field
and built without pydantic; any other beat (a field of another type, out of range, an
unusual time format, resources, unknown fields) goes through the pydantic model, so every
refusal keeps pydantic's message and every accepted beat is the model pydantic would build
(tests/unit/test_beat_validation.py holds the two paths to that)."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from console.gateway.agent_heartbeat import (
    MAX_BACKEND,
    MAX_CONTEXT,
    MAX_INTERVAL_S,
    MAX_NAME,
    MAX_SEQ,
    MAX_TIMEOUT_S,
    PHASES,
    AgentHeartbeat,
)

#: the fields a beat may carry and still take the fast path (``resources`` only empty, as
#: irq's helper sends it with every beat; resources held: pydantic)
FAST_FIELDS = frozenset({"type", "backend", "context", "native_id", "seq", "at", "progress",
                         "details", "resources", "interval_s", "timeout_s", "in_flight_step",
                         "phase"})
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?")
_new = object.__new__
_set = object.__setattr__


def _number(value: Any, low: float, high: float, *, open_low: bool) -> float | None:
    """``value`` as pydantic's float field would take it, when plainly in range; None: not
    plain (the caller falls back to pydantic)."""
    kind = type(value)
    if kind is not float and kind is not int:
        return None
    number = float(value)
    if not math.isfinite(number) or number > high or number < low or (
            open_low and number == low):
        return None
    return number


_last_time: list[Any] = [None, None]  # the last time parsed (a batch's beats share theirs)


def iso_time(value: Any) -> datetime | None:
    """``value`` as a time when it is plainly ISO-8601 text (as parsed, naive or aware);
    None: not plain (pydantic decides). The last text parsed is remembered: a frame's beats
    share their time."""
    if value == _last_time[0] and type(value) is str:
        return _last_time[1]  # type: ignore[no-any-return]
    if type(value) is not str or _ISO.fullmatch(value) is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    _last_time[0], _last_time[1] = value, parsed
    return parsed


def fast_beat(item: dict[str, Any]) -> AgentHeartbeat | None:
    """The beat, validated by hand; None when it is not plain (validate it with pydantic).

    ``item`` has its ``type`` set already (``heartbeat``)."""
    if not FAST_FIELDS.issuperset(item):
        return None
    get = item.get
    if get("type") != "heartbeat":
        return None
    backend = get("backend")
    native_id = get("native_id")
    if type(backend) is not str or not 0 < len(backend) <= MAX_BACKEND:
        return None
    if type(native_id) is not str or not 0 < len(native_id) <= MAX_NAME:
        return None
    context = get("context")
    if context is not None and (type(context) is not str or len(context) > MAX_CONTEXT):
        return None
    seq = get("seq", 0)
    if type(seq) is not int or not 0 <= seq <= MAX_SEQ:
        return None
    at = get("at")
    if at is not None:
        at = iso_time(at)
        if at is None:
            return None
    # a float in range first (NaN and infinities fail the comparisons), then the rest
    progress = get("progress")
    if progress is not None and not (type(progress) is float and 0.0 <= progress <= 1.0):
        progress = _number(progress, 0.0, 1.0, open_low=False)
        if progress is None:
            return None
    interval = get("interval_s")
    if interval is not None and not (
            type(interval) is float and 0.0 < interval <= MAX_INTERVAL_S):
        interval = _number(interval, 0.0, MAX_INTERVAL_S, open_low=True)
        if interval is None:
            return None
    timeout = get("timeout_s")
    if timeout is not None and not (type(timeout) is float and 0.0 < timeout <= MAX_TIMEOUT_S):
        timeout = _number(timeout, 0.0, MAX_TIMEOUT_S, open_low=True)
        if timeout is None:
            return None
    step = get("in_flight_step")
    if step is not None and (type(step) is not str or len(step) > MAX_NAME):
        return None
    phase = get("phase", "running")
    if type(phase) is not str or phase not in PHASES:
        return None
    resources = get("resources")
    if resources is not None:
        if type(resources) is not list or resources:
            return None
        resources = []
    details = get("details")
    if details is None:
        if "details" in item:
            return None  # null is not a dict: pydantic says so
        details = {}
    elif type(details) is not dict or not all(type(k) is str for k in details):
        return None
    else:
        details = dict(details)
    beat = _new(AgentHeartbeat)
    _set(beat, "__dict__", {
        "type": "heartbeat", "backend": backend, "context": context, "native_id": native_id,
        "seq": seq, "at": at, "progress": progress, "details": details, "resources": resources,
        "interval_s": interval, "timeout_s": timeout, "in_flight_step": step,
        "phase": phase})
    _set(beat, "__pydantic_fields_set__", set(item))
    _set(beat, "__pydantic_extra__", None)
    _set(beat, "__pydantic_private__", None)
    return beat
