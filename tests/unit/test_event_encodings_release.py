"""A heartbeat-only event's encodings are dropped once every subscriber has been sent it
(event_log.EventLog.release_encodings): the log keeps 100,000 events, and their encodings
were most of its memory. An event a subscriber has not been sent keeps them; one asked for
again (a replay) is encoded again, the same bytes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.gateway.event_log import BeatEvent, Subscriber
from console.gateway.hub import Hub
from console.gateway.protocol import AgentHeartbeat
from console.model import Run

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def _hub_with_beats(runs: int, rounds: int) -> Hub:
    hub = Hub(clock=lambda: T0 + timedelta(seconds=30))
    hub.observe_runs([Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local",
                          native_id=f"wf-{i}", started_at=T0) for i in range(runs)])
    for k in range(rounds):
        for i in range(runs):
            hub.agent_heartbeat(f"dbos:local/wf-{i}", AgentHeartbeat(
                type="heartbeat", backend="dbos", context="local", native_id=f"wf-{i}",
                seq=k + 1, at=T0 + timedelta(seconds=k), interval_s=5.0, progress=k / 10))
        hub.flush_heartbeats()
    return hub


def _beats(hub: Hub) -> list[BeatEvent]:
    return [e for e in hub.log if isinstance(e, BeatEvent)]


def test_encodings_go_once_every_subscriber_was_sent_the_event() -> None:
    hub = _hub_with_beats(runs=5, rounds=4)
    beats = _beats(hub)
    assert len(beats) == 15  # the first round's beats are state events (a first beat)
    middle = beats[7].seq
    behind = Subscriber(wake=lambda: None, cursor=middle)
    current = Subscriber(wake=lambda: None, cursor=hub.seq)
    hub.subscribers.update({behind, current})
    encoded = {e.seq: (e.compact(), e.full()) for e in beats}
    assert hub.events.release_encodings() == 8  # up to the slowest subscriber's cursor
    for e in beats:
        compact = e.compact()
        assert compact == encoded[e.seq][0] and e.full() == encoded[e.seq][1]
        assert (compact is encoded[e.seq][0]) == (e.seq > middle), e.seq
    behind.cursor = hub.seq
    assert hub.events.release_encodings() == 7  # the rest; the first eight not walked again
    assert hub.events.release_encodings() == 0


def test_with_no_subscriber_every_beat_event_lets_its_encodings_go() -> None:
    hub = _hub_with_beats(runs=3, rounds=3)
    for e in _beats(hub):
        e.compact()
    assert hub.events.release_encodings() == len(_beats(hub)) == 6
