"""The pusher keeps the last policy frame it read: a policy guard imported after the agent
channel connected (the gateway sends the policy once, right after the hello) still gets it.
Regression: the Restate demo's report handler connected first, the refund handler's guard was
imported later and decided without a policy (fail open)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from backend_adapters import heartbeat_push
from backend_adapters.heartbeat_push import HeartbeatPusher, set_policy_sink


@pytest.fixture
def clean_sink() -> Iterator[None]:
    saved = heartbeat_push._policy_sink, heartbeat_push._last_policy_frame
    heartbeat_push._policy_sink, heartbeat_push._last_policy_frame = None, None
    yield
    heartbeat_push._policy_sink, heartbeat_push._last_policy_frame = saved


def test_a_sink_set_late_gets_the_frame_read_before(clean_sink: None) -> None:
    pusher = HeartbeatPusher("ws://127.0.0.1:1/agent")
    frame = {"type": "policy", "version": "sha256:a", "policy": None}
    pusher._handle_policy(frame)
    got: list[dict[str, Any]] = []
    set_policy_sink(got.append)
    assert got == [frame]
    newer = {"type": "policy", "version": "sha256:b", "policy": None}
    pusher._handle_policy(newer)
    assert got == [frame, newer]


def test_a_pusher_with_its_own_callback_does_not_feed_the_shared_sink(clean_sink: None) -> None:
    own: list[dict[str, Any]] = []
    shared: list[dict[str, Any]] = []
    set_policy_sink(shared.append)
    HeartbeatPusher("ws://127.0.0.1:1/agent", on_policy=own.append)._handle_policy(
        {"type": "policy", "version": "v", "policy": None}
    )
    assert len(own) == 1 and shared == []
