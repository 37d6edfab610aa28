"""The pusher's heartbeats frames against a real gateway: every beat of a batch lands, and a
refused beat is refused alone, with one error frame per code that counts them."""

from __future__ import annotations

import asyncio
import time

from backend_adapters.heartbeat_push import HeartbeatPusher, heartbeat_frame


async def test_batched_beats_all_land_and_a_refused_one_is_refused_alone(trust_gateway):
    ids = trust_gateway.observe(*(f"wf-{i}" for i in range(200)))
    trust_gateway.observe("wf-x", context="other")
    hub = trust_gateway.gateway.hub
    pusher = HeartbeatPusher(trust_gateway.url + "/agent", trust_gateway.tokens["agent-a"],
                             batch=50)
    try:
        for i in range(200):
            pusher.push(heartbeat_frame(native_id=f"wf-{i}", seq=1, phase="running",
                                        context="local", progress=0.5, interval_s=5.0))
            if i == 100:  # agent-a's scope is dbos:local: refused, the rest of its batch not
                pusher.push(heartbeat_frame(native_id="wf-x", seq=1, phase="running",
                                            context="other"))
        assert await asyncio.to_thread(pusher.flush, 10.0)
        deadline = time.monotonic() + 10
        while hub.beats_accepted < 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert hub.beats_accepted == 200
        hub.flush_heartbeats()
        assert all(hub.runs[i].progress == 0.5 for i in ids)
        assert hub.runs["dbos:other/wf-x"].heartbeat_at is None
        while not pusher.errors and time.monotonic() < deadline:
            await asyncio.to_thread(pusher.flush, 0.2)
            await asyncio.sleep(0.05)
        assert [e["code"] for e in pusher.errors] == ["out_of_scope"]
        assert "1 of " in pusher.errors[0]["message"]
        assert trust_gateway.gateway.counters["agent_out_of_scope"] == 1
        # the same runs' next beats through the same connection: plain, taken by hand
        assert hub.plain_beats.taken == 0  # first beats bind their runs: the general way
        for i in range(200):
            pusher.push(heartbeat_frame(native_id=f"wf-{i}", seq=2, phase="running",
                                        context="local", progress=0.75, interval_s=5.0))
        assert await asyncio.to_thread(pusher.flush, 10.0)
        while hub.beats_accepted < 400 and time.monotonic() < deadline + 10:
            await asyncio.sleep(0.05)
        assert (hub.beats_accepted, hub.plain_beats.taken) == (400, 200)
        assert trust_gateway.gateway.stats()["beats_by_hand"] == 200
        hub.flush_heartbeats()
        assert all(hub.runs[i].progress == 0.75 for i in ids)
    finally:
        await asyncio.to_thread(pusher.close, 2.0)
