"""The hand-written validation of batched beats (console.gateway.beat_validation) against
the pydantic model: the same beats accepted, as equal models, and every refusal with
pydantic's own message (a refused beat takes the pydantic path)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from console.gateway.beat_validation import fast_beat
from console.gateway.protocol import AgentHeartbeat, AgentHeartbeats, FrameError, parse_agent_frame

PLAIN = {"type": "heartbeat", "backend": "bench", "context": "local", "native_id": "run-1",
         "seq": 1733212345678, "at": "2026-12-03T07:00:00.123456+00:00", "progress": 0.5,
         "interval_s": 5.0, "timeout_s": 12.0}


def _pydantic(item: dict[str, Any]) -> AgentHeartbeat | str:
    try:
        return AgentHeartbeat.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first['msg']}"


def _same(item: dict[str, Any]) -> None:
    """fast_beat accepts only what pydantic accepts, as an equal model with equal types;
    the parser's outcome for the beat in a heartbeats frame is pydantic's."""
    expected = _pydantic(dict(item))
    fast = fast_beat(dict(item))
    if fast is not None:
        assert isinstance(expected, AgentHeartbeat), (item, expected)
        assert fast == expected
        assert fast.model_dump() == expected.model_dump()
        for name in AgentHeartbeat.model_fields:
            assert type(getattr(fast, name)) is type(getattr(expected, name)), name
        assert fast.model_fields_set == expected.model_fields_set
    body = {k: v for k, v in item.items()}
    try:
        text = json.dumps({"type": "heartbeats", "id": "f", "beats": [body]}, allow_nan=False)
    except ValueError:
        return  # not JSON: the frame is refused before any beat is looked at
    parsed = parse_agent_frame(text)
    assert isinstance(parsed, AgentHeartbeats)
    got = parsed.beats[0]
    if isinstance(expected, AgentHeartbeat):
        assert isinstance(got, AgentHeartbeat) and got == expected
    else:
        assert isinstance(got, FrameError) and got.code == "invalid"
        assert got.message == f"beats[0]: {expected}"


def test_a_plain_beat_takes_the_fast_path_and_equals_the_model():
    beat = fast_beat(dict(PLAIN))
    assert beat is not None and beat == AgentHeartbeat.model_validate(PLAIN)
    _same(PLAIN)


@pytest.mark.parametrize("change", [
    {"progress": 1.5}, {"progress": -0.1}, {"progress": "0.5"}, {"progress": True},
    {"progress": 1}, {"progress": 0}, {"seq": -1}, {"seq": 2**53 + 1}, {"seq": 1.0},
    {"seq": "7"}, {"seq": True}, {"interval_s": 0}, {"interval_s": 3600},
    {"interval_s": 3600.5}, {"timeout_s": 86_401}, {"timeout_s": -1},
    {"backend": ""}, {"backend": "x" * 33}, {"backend": 7}, {"native_id": ""},
    {"native_id": "n" * 513}, {"context": None}, {"context": "c" * 129}, {"context": 3},
    {"at": "yesterday"}, {"at": "2026-13-01T00:00:00Z"}, {"at": "2026-12-03T07:00:00Z"},
    {"at": "2026-12-03T07:00:00"}, {"at": "2026-12-03 07:00:00+00:00"},
    {"at": "2026-12-03T07:00:00.1234567+00:00"}, {"at": 1733212345}, {"at": None},
    {"phase": "paused"}, {"phase": "sleeping"}, {"phase": None},
    {"in_flight_step": "s" * 512}, {"in_flight_step": "s" * 513}, {"in_flight_step": 5},
    {"details": {"a": [1, {"b": 2}]}}, {"details": None}, {"details": []},
    {"resources": [{"id": "gpu-0", "kind": "gpu"}]}, {"resources": "no"}, {"resources": []},
    {"resources": None}, {"resources": {}},
    {"unknown": 1},
])
def test_edge_cases_agree_with_pydantic(change: dict[str, Any]) -> None:
    _same({**PLAIN, **change})


@pytest.mark.parametrize("missing", ["backend", "native_id", "seq", "at", "progress",
                                     "interval_s", "timeout_s", "context"])
def test_missing_fields_agree_with_pydantic(missing: str) -> None:
    _same({k: v for k, v in PLAIN.items() if k != missing})


def test_a_bad_beat_is_refused_alone_with_pydantics_message() -> None:
    frame = json.dumps({"type": "heartbeats", "beats": [
        {k: v for k, v in PLAIN.items() if k != "type"}, {**PLAIN, "progress": 7}]})
    msg = parse_agent_frame(frame)
    assert isinstance(msg, AgentHeartbeats)
    ok, bad = msg.beats
    assert isinstance(ok, AgentHeartbeat)
    assert isinstance(bad, FrameError)
    assert bad.message == "beats[1]: progress: Input should be less than or equal to 1"


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**60, max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False), st.floats(min_value=0, max_value=1),
    st.text(max_size=40), st.sampled_from(["running", "paused", "waiting", "2026-12-03T07:00:00Z",
                                           "2026-12-03T07:00:00.5+02:00", "2026-02-30T00:00:00"]))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["backend", "context", "native_id", "seq", "at", "progress", "interval_s",
                     "timeout_s", "in_flight_step", "phase", "details"]),
    _scalars, max_size=11))
def test_any_mix_of_fields_agrees_with_pydantic(fields: dict[str, Any]) -> None:
    item = {**PLAIN, **fields}
    if any(isinstance(v, float) and not math.isfinite(v) for v in item.values()):
        return
    _same(item)
