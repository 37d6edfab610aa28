"""The shared agent-side policy guard (backend_adapters/policy_guard.py) and the pusher's policy
channel (heartbeat_push.py): a policy given to the cache directly, or sent by a stand-in agent
channel on loopback (the real gateway is in test_dbos_policy_guard.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from backend_adapters.heartbeat_push import HeartbeatPusher
from backend_adapters.policy_guard import (
    NO_POLICY_CLOSED,
    NO_POLICY_OPEN,
    PolicyCache,
    ToolProhibited,
    approval_request,
    check_call,
    obligations_for,
    open_obligations,
)
from console.policy.loader import load_policy
from console.policy.model import Policy

POLICY_FILE = Path(__file__).parents[1] / "support" / "dbos_policy.toml"
RUN = {"backend": "dbos", "context": "local", "native_id": "wf-1"}


@pytest.fixture
def policy() -> Policy:
    return load_policy(POLICY_FILE)


@pytest.fixture
def no_gateway(monkeypatch: pytest.MonkeyPatch) -> HeartbeatPusher:
    monkeypatch.delenv("IRQ_AGENT_URL", raising=False)
    return HeartbeatPusher()


def wait_for(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.02)


# ------------------------------------------------------------------------ local decisions


def test_without_a_policy_sensitive_calls_fail_closed_and_others_run(
    no_gateway: HeartbeatPusher,
) -> None:
    cache = PolicyCache()
    started = time.monotonic()
    refused = check_call("pay", {}, sensitive=True, cache=cache, pusher=no_gateway)
    allowed = check_call("pay", {}, cache=cache, pusher=no_gateway)
    assert time.monotonic() - started < 1.0  # no gateway configured: nothing to wait for
    assert refused.outcome == "prohibit" and refused.winner is None
    assert refused.explanation[0] == NO_POLICY_CLOSED
    assert "marked sensitive at the call site" in refused.explanation[1]
    assert allowed.outcome == "permit" and allowed.explanation[0] == NO_POLICY_OPEN


def test_only_the_first_check_waits_for_a_policy_that_never_comes() -> None:
    cache = PolicyCache()
    down = HeartbeatPusher("ws://127.0.0.1:9/agent", min_backoff_s=5.0)  # nothing listens
    try:
        started = time.monotonic()
        first = check_call("pay", {}, sensitive=True, cache=cache, pusher=down, wait_s=0.4)
        waited = time.monotonic() - started
        second = check_call("pay", {}, sensitive=True, cache=cache, pusher=down, wait_s=0.4)
        assert 0.35 <= waited and time.monotonic() - started - waited < 0.2
        assert first.outcome == second.outcome == "prohibit"
        assert "no policy frame from the gateway" in first.explanation[1]
    finally:
        down.close(0.0)


def test_a_policy_decides_locally(policy: Policy, no_gateway: HeartbeatPusher) -> None:
    cache = PolicyCache()
    cache.set_policy(policy)
    kw: dict[str, Any] = {"cache": cache, "pusher": no_gateway, **RUN}
    wipe = check_call("wipe_ledger", {}, **kw)
    assert (wipe.outcome, wipe.winner, wipe.policy_version) == (
        "prohibit",
        "no-wipe",
        policy.version,
    )
    assert "no-wipe" in str(ToolProhibited(wipe, "wipe_ledger"))
    assert check_call("refund", {"amount": 5}, **kw).outcome == "permit"
    big = check_call("refund", {"amount": 250}, **kw)
    assert big.outcome == "require_approval"
    request = approval_request("refund", {"amount": 250}, big)
    assert request.title == "refund: approval required by refund-large"
    assert request.description == "refunds over 100 EUR need a human"
    assert request.allowed_decisions == ["approve", "edit", "reject"]
    assert request.args_schema["properties"] == {"amount": {"type": "integer"}}
    assert request.policy == {
        "rule": "refund-large",
        "why": "refunds over 100 EUR need a human",
        "decide_role": "operator",
        "approvers": 1,
        "policy_version": policy.version,
    }


def test_obligations_open_with_a_deadline_or_are_waived_by_name(
    policy: Policy, no_gateway: HeartbeatPusher
) -> None:
    cache = PolicyCache()
    cache.set_policy(policy)
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    kw: dict[str, Any] = {"cache": cache, "pusher": no_gateway, **RUN}
    research = check_call("read_records", {}, data=["patients"], team="research", **kw)
    compliance = check_call("read_records", {}, data=["patients"], team="compliance", **kw)
    opened = obligations_for(research, call_id="7", tool="read_records", at=at, **RUN)
    assert {(o.id, o.state, o.due_at) for o in opened} == {
        ("dbos:local/wf-1#7/notify-ciso", "open", at + timedelta(seconds=600)),
        ("dbos:local/wf-1#7/log-access", "open", at + timedelta(seconds=1)),
    }
    waived = obligations_for(compliance, call_id="7", at=at, policy=policy, **RUN)
    assert {(o.rule, o.state, o.by, o.what) for o in waived} == {
        ("log-access", "open", "", "write the access log"),
        ("notify-ciso", "waived", "compliance-exempt", "notify the CISO"),
    }
    # the same call id and decision time (a replay) build the same obligations
    assert obligations_for(research, call_id="7", tool="read_records", at=at, **RUN) == opened


def test_after_policy_null_the_last_known_sensitive_tools_still_fail_closed(
    policy: Policy, no_gateway: HeartbeatPusher
) -> None:
    cache = PolicyCache()
    cache.update({"type": "policy", "version": policy.version, "policy": policy.model_dump()})
    assert cache.version == policy.version
    cache.update({"type": "policy", "version": None, "policy": None})
    assert cache.received and cache.engine() is None
    wipe = check_call("wipe_ledger", {}, cache=cache, pusher=no_gateway)
    assert wipe.outcome == "prohibit" and wipe.explanation[0] == NO_POLICY_CLOSED
    assert "policy: null" in wipe.explanation[1]
    assert check_call("refund", {"amount": 900}, cache=cache, pusher=no_gateway).outcome == (
        "permit"
    )


def test_an_invalid_policy_frame_keeps_the_previous_policy(policy: Policy) -> None:
    cache = PolicyCache()
    cache.set_policy(policy)
    cache.update({"type": "policy", "version": "sha256:bad", "policy": {"rules": "nope"}})
    assert cache.version == policy.version and cache.error and "sha256:bad" in cache.error


# ----------------------------------------------------------------- the agent channel side


class AgentChannel:
    """A stand-in gateway agent channel: sends a policy frame after the hello, answers pings,
    records every frame; ``drop_before_pong`` closes the first connection instead of
    answering its first ping (frames sent but never confirmed)."""

    def __init__(
        self,
        policy: dict[str, Any] | None,
        *,
        drop_before_pong: bool = False,
        refuse_first_event: bool = False,
    ) -> None:
        self.frames: list[dict[str, Any]] = []
        self.connections = 0
        self.drop_before_pong = drop_before_pong
        self.refuse_first_event = refuse_first_event

        def handler(ws: ServerConnection) -> None:
            self.connections += 1
            first = self.connections == 1
            try:
                for raw in ws:
                    frame = json.loads(raw)
                    self.frames.append(frame)
                    if frame["type"] == "policy_event" and self.refuse_first_event:
                        self.refuse_first_event = False
                        self.frames.pop()  # over the budget: dropped, like the gateway does
                        ws.send(json.dumps({"type": "error", "code": "rate_limited"}))
                    elif frame["type"] == "hello":
                        version = policy["version"] if policy else None
                        ws.send(
                            json.dumps({"type": "policy", "version": version, "policy": policy})
                        )
                    elif frame["type"] == "ping":
                        if first and self.drop_before_pong:
                            ws.close()
                            return
                        ws.send(json.dumps({"type": "pong", "id": frame.get("id")}))
            except ConnectionClosed:
                pass

        self.server = serve(handler, "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}/agent"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == "policy_event"]

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(5)


@pytest.fixture
def channel(policy: Policy) -> Iterator[AgentChannel]:
    served = AgentChannel(policy.model_dump(mode="json"), drop_before_pong=True)
    yield served
    served.close()


def test_the_pusher_connects_for_the_policy_and_redelivers_unconfirmed_events_in_order(
    channel: AgentChannel, policy: Policy
) -> None:
    cache = PolicyCache()
    pusher = HeartbeatPusher(channel.url, min_backoff_s=0.05, on_policy=cache.update)
    try:
        # a guard with no heartbeat queued still connects and gets the policy
        decision = check_call("wipe_ledger", {}, cache=cache, pusher=pusher, wait_s=5.0)
        assert cache.version == policy.version and decision.winner == "no-wipe"
        research = check_call("read_records", {}, data=["patients"], cache=cache, pusher=pusher)
        opened = open_obligations(research, call_id="3", tool="read_records", pusher=pusher, **RUN)
        assert len(opened) == 2
        # the first connection closes before confirming them: they are sent again, in order
        assert pusher.flush(5.0)
        assert channel.connections >= 2
        ids = [e["obligation"]["id"] for e in channel.events()]
        expected = [o.id for o in opened]
        assert ids == expected + expected  # sent, dropped unconfirmed, sent again
        assert pusher.events_pending == 0 and pusher.events_confirmed >= 2
    finally:
        pusher.close(1.0)


def test_a_batch_the_gateway_rate_limited_is_sent_again(policy: Policy) -> None:
    served = AgentChannel(policy.model_dump(mode="json"), refuse_first_event=True)
    pusher = HeartbeatPusher(served.url, on_policy=PolicyCache().update)
    try:
        for n in range(3):
            pusher.send_event({"type": "policy_event", "n": n})
        assert pusher.flush(5.0)
        # the first frame was dropped by the budget; the whole batch came again, in order
        assert [e["n"] for e in served.events()] == [1, 2, 0, 1, 2]
        assert pusher.events_confirmed == 3 and served.connections == 1
    finally:
        pusher.close(1.0)
        served.close()


def test_the_event_fifo_is_bounded_and_drops_the_oldest(no_gateway: HeartbeatPusher) -> None:
    pusher = HeartbeatPusher("ws://127.0.0.1:9/agent", max_events=3, min_backoff_s=5.0)
    try:
        for n in range(5):
            pusher.send_event({"type": "policy_event", "n": n})
        assert pusher.events_dropped == 2 and pusher.events_pending == 3
    finally:
        pusher.close(0.0)
