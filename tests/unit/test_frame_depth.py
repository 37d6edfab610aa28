"""A heartbeats frame's nesting is checked beat by beat (protocol._nests_too_deep): the same
answer as walking the whole frame, at every depth around the cap, for every place a deep
value can hide."""

from __future__ import annotations

import json
from typing import Any

import pytest

from console.gateway.protocol import (
    MAX_DEPTH,
    FrameError,
    _nests_too_deep,
    _too_deep,
    parse_agent_frame,
)


def _nested(levels: int) -> Any:
    """A value that nests ``levels`` containers (lists and objects in turn)."""
    value: Any = 1
    for k in range(levels):
        value = [value] if k % 2 else {"v": value}
    return value


def _plain(i: int) -> dict[str, Any]:
    return {"backend": "dbos", "context": "local", "native_id": f"wf-{i}", "seq": 1,
            "details": {}, "resources": []}


@pytest.mark.parametrize("levels", [MAX_DEPTH - 4, MAX_DEPTH - 3, MAX_DEPTH - 2, MAX_DEPTH])
@pytest.mark.parametrize("where", ["details", "resources", "beat", "id", "unknown field"])
def test_beat_by_beat_agrees_with_the_whole_walk(levels: int, where: str) -> None:
    beats: list[Any] = [_plain(i) for i in range(100)]
    frame: dict[str, Any] = {"type": "heartbeats", "beats": beats}
    deep = _nested(levels)
    if where == "details":
        beats[57]["details"] = {"x": deep}
    elif where == "resources":
        beats[99]["resources"] = [deep]
    elif where == "beat":
        beats[3] = [deep]
    elif where == "id":
        frame["id"] = [deep]
    else:
        beats[10]["extra"] = deep
    assert _nests_too_deep(frame) == _too_deep(frame)


def test_a_deep_beat_in_a_frame_of_helper_beats_is_refused_whole() -> None:
    beats: list[Any] = [_plain(i) for i in range(100)]
    beats[42]["details"] = {"x": _nested(MAX_DEPTH)}
    with pytest.raises(FrameError) as err:
        parse_agent_frame(json.dumps({"type": "heartbeats", "beats": beats}))
    assert err.value.code == "malformed" and "deeper" in err.value.message
    beats[42]["details"] = {"x": _nested(MAX_DEPTH - 5)}
    parse_agent_frame(json.dumps({"type": "heartbeats", "beats": beats}))  # within the cap
