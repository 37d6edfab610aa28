"""Pure logic of the gateway's fast path: the heartbeats frame, the resync decision, the
subscription filter and the events' encodings (no sockets here)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

import pytest

from console.gateway.event_log import BeatEvent, event_scope, lag_decision
from console.gateway.hub import Hub
from console.gateway.protocol import (
    MAX_BATCH_BEATS,
    AgentHeartbeat,
    AgentHeartbeats,
    FrameError,
    Hello,
    SubscriptionFilter,
    encode,
    parse_agent_frame,
    parse_client_frame,
)
from console.gateway.run_contracts import ContractCache
from console.model import Run
from console.run_record import RunRecord


def _beat(native_id: str, **kw) -> dict:
    return {"backend": "dbos", "context": "local", "native_id": native_id, "seq": 1, **kw}


def test_a_heartbeats_frame_parses_each_beat_on_its_own():
    frame = json.dumps({"type": "heartbeats", "id": "b1", "beats": [
        _beat("a", progress=0.5),
        _beat("b", progress=7),  # out of range: refused alone
        "not a beat",
        {**_beat("c"), "type": "heartbeat"},  # the type may be given
        {**_beat("d"), "type": "ping"},
    ]})
    msg = parse_agent_frame(frame)
    assert isinstance(msg, AgentHeartbeats) and msg.id == "b1"
    kinds = [type(b).__name__ for b in msg.beats]
    assert kinds == ["AgentHeartbeat", "FrameError", "FrameError", "AgentHeartbeat",
                     "FrameError"]
    first = msg.beats[0]
    assert isinstance(first, AgentHeartbeat) and first.native_id == "a" and first.progress == 0.5
    bad = msg.beats[1]
    assert isinstance(bad, FrameError) and bad.code == "invalid" and "beats[1]" in bad.message
    assert bad.ref == "b1"


@pytest.mark.parametrize("beats, needle", [
    ([], "non-empty"),
    ("x", "non-empty"),
    ([_beat("a")] * (MAX_BATCH_BEATS + 1), f"at most {MAX_BATCH_BEATS}"),
])
def test_a_heartbeats_frame_without_a_usable_list_is_refused_whole(beats, needle):
    with pytest.raises(FrameError) as err:
        parse_agent_frame(json.dumps({"type": "heartbeats", "beats": beats}))
    assert err.value.code == "invalid" and needle in err.value.message


def test_a_heartbeats_frame_with_an_unknown_field_is_refused():
    with pytest.raises(FrameError, match="unknown field 'extra'"):
        parse_agent_frame(json.dumps({"type": "heartbeats", "beats": [_beat("a")],
                                      "extra": 1}))


def test_the_single_beat_frame_still_parses():
    msg = parse_agent_frame(json.dumps({"type": "heartbeat", **_beat("a")}))
    assert isinstance(msg, AgentHeartbeat)


def test_strict_json_survives_the_fast_decoder():
    for text in ('{"type": "heartbeats", "beats": [{"progress": NaN}]}',
                 '{"type": "heartbeats", "beats": [{"progress": 1e999}]}'):
        with pytest.raises(FrameError) as err:
            parse_agent_frame(text)
        assert err.value.code == "malformed"
    big = '{"type": "heartbeat", "backend": "dbos", "native_id": "w", "seq": ' + "9" * 30 + "}"
    with pytest.raises(FrameError) as err:  # read as an integer (then out of range), not a float
        parse_agent_frame(big)
    assert err.value.code == "invalid"


@pytest.mark.parametrize("cursor, seq, first, expected", [
    (10, 10, 1, "current"),
    (9, 10, 1, "send"),
    (0, 10, 1, "send"),  # the log reaches back to event 1
    (0, 10, 2, "resync"),  # event 1 fell off the log
    (10, 1_000, 1, "resync"),  # more than max_lag behind
    (900, 1_000, 1, "send"),
    (5, 10, None, "resync"),  # nothing logged at all
])
def test_lag_decision_sends_events_or_resyncs_from_a_snapshot(cursor, seq, first, expected):
    assert lag_decision(cursor, seq, first, max_lag=100) == expected


def test_a_subscriber_falling_behind_is_told_to_resync_and_memory_stays_the_log():
    hub = Hub(event_log_size=1000)
    hub.max_lag = 100
    from console.gateway.event_log import Subscriber

    fast, slow = Subscriber(wake=lambda: None), Subscriber(wake=lambda: None)
    hub.subscribers |= {fast, slow}
    for i in range(50):
        hub.publish("notice", {"level": "info", "run_id": None, "message": str(i)})
    assert [e.seq for e in hub.take(fast) or []] == list(range(1, 51))
    for i in range(80):
        hub.publish("notice", {"level": "info", "run_id": None, "message": str(i)})
    assert hub.take(slow) is None  # 130 behind: a snapshot instead
    assert len(hub.take(fast) or []) == 80  # 80 behind: the events
    assert hub.take(fast) == []


def test_filters_admit_their_context_and_kinds():
    ctx = SubscriptionFilter(contexts=["dbos:prod"])
    assert ctx.admits("run", "dbos:prod") and not ctx.admits("run", "dbos:dev")
    assert ctx.admits("policy", None)  # events of no context reach everyone
    inbox = SubscriptionFilter(kinds=["interrupt", "interrupt_removed"])
    assert inbox.admits("interrupt", "dbos:dev") and not inbox.admits("run", "dbos:dev")
    assert not inbox.admits("beat", "dbos:dev")  # a beat is a run event
    assert SubscriptionFilter(contexts=["a:b"]).key == SubscriptionFilter(contexts=["a:b"]).key
    hello = parse_client_frame(json.dumps({"type": "hello", "filter": {"kinds": ["notice"]},
                                           "beats": "compact"}))
    assert isinstance(hello, Hello) and hello.filter is not None and hello.beats == "compact"
    with pytest.raises(FrameError):
        parse_client_frame(json.dumps({"type": "hello", "filter": {"kinds": ["nope"]}}))


def test_event_scopes_name_the_context():
    assert event_scope("run", {"id": "dbos:prod/wf-1"}) == "dbos:prod"
    assert event_scope("interrupt", {"run_id": "dbos:prod/wf-1"}) == "dbos:prod"
    assert event_scope("interrupt_removed", {"id": "dbos:prod/wf-1#x"}) == "dbos:prod"
    assert event_scope("backend", {"backend": "dbos", "context": "prod"}) == "dbos:prod"
    assert event_scope("notice", {"run_id": None}) is None
    assert event_scope("policy", {"version": "x"}) is None


def test_a_beat_event_is_encoded_once_in_each_form():
    at = datetime(2026, 12, 1, tzinfo=UTC)
    run = Run(id="dbos:local/wf", backend="dbos", context="local", native_id="wf",
              heartbeat_at=at, progress=0.25)
    beat = {"id": run.id, "heartbeat_at": "2026-12-01T00:00:00+00:00", "progress": 0.25}
    record = RunRecord.of(run)
    contracts = ContractCache({run.id: record}, clock=lambda: at)
    ev = BeatEvent(7, record, at, 0.25, contracts.render)
    full, compact = json.loads(ev.full()), json.loads(ev.compact())
    assert full["kind"] == "run" and full["seq"] == 7 and ev.scope == "dbos:local"
    assert full["data"]["progress"] == 0.25 and full["data"]["id"] == run.id
    assert full["data"] == run.contract(at)
    assert compact == {"seq": 7, "kind": "beat", "data": beat}
    assert ev.full() is ev.full() and ev.compact() is ev.compact()
    assert ev["data"]["heartbeat_at"] == beat["heartbeat_at"]  # rendered on demand
    encoded = ev.full()
    ev.release()  # every client was sent it: the encodings go, and come back the same
    assert ev.full() is not encoded and ev.full() == encoded
    assert sys.getsizeof(ev) <= 120


@pytest.mark.parametrize("run_id, at, progress", [
    ("dbos:local/wf", datetime(2026, 12, 1, 0, 0, 0, 123456, tzinfo=UTC), 0.1 + 0.2),
    ('dbos:local/a "quoted" \\ id\n', datetime(2026, 12, 1, tzinfo=UTC), None),
    ("dbos:local/ünïcødé-✓", None, 1.0),
    ("dbos:local/tiny", datetime(2026, 12, 1, tzinfo=UTC), 1e-07),
    ("dbos:local/nan", datetime(2026, 12, 1, tzinfo=UTC), float("nan")),
])
def test_a_beat_events_compact_form_is_what_encode_makes_of_it(run_id, at, progress):
    record = RunRecord.of(Run(id=run_id, backend="dbos", context="local", native_id="x"))
    ev = BeatEvent(2**53 + 7, record, at, progress, lambda *_: b"{}")
    data = {"id": run_id, "heartbeat_at": at.isoformat() if at else None, "progress": progress}
    assert ev.compact() == encode({"seq": ev.seq, "kind": "beat", "data": data})
    assert json.loads(ev.compact())["data"]["id"] == run_id


def test_a_run_event_is_slots_and_reads_the_same_before_and_after_encoding():
    at = datetime(2026, 12, 1, tzinfo=UTC)
    hub = Hub(clock=lambda: at)
    hub.observe_runs([Run(id="dbos:local/wf", backend="dbos", context="local",
                          native_id="wf", heartbeat_at=at, progress=0.5)])
    event = hub.log[-1]
    assert event["kind"] == "run" and event.scope == "dbos:local"
    assert sys.getsizeof(event) <= 120 and dict.__len__(event) == 0  # no dict entries
    before = event["data"]  # rendered from the run (ages as of the real clock)
    assert (before["id"], before["progress"]) == ("dbos:local/wf", 0.5)
    encoded = json.loads(event.full())  # rendered by the hub (its clock)
    assert encoded == {"seq": event.seq, "kind": "run",
                       "data": hub.runs["dbos:local/wf"].contract(at)}
    assert event["data"] == encoded["data"]  # decoded once the run version is let go
