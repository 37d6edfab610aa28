"""The agents' heartbeat pusher works with a scoped token, and a refused fleet logs once per
error code and interval, not once per beat."""

from __future__ import annotations

import asyncio
import logging
import time

from backend_adapters.heartbeat_push import HeartbeatPusher, heartbeat_frame


async def _until(predicate, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_the_pusher_reports_in_scope_and_is_told_out_of_scope(trust_gateway, caplog):
    tg = trust_gateway
    (run_id,) = tg.observe("wf-push")
    hub = tg.gateway.hub
    caplog.set_level(logging.WARNING, logger="irq.agent.heartbeat")
    good = HeartbeatPusher(tg.url + "/agent", tg.tokens["agent-a"], min_backoff_s=0.05)
    refused = HeartbeatPusher(tg.url + "/agent", tg.tokens["team-a"], min_backoff_s=0.05)
    try:
        good.push(heartbeat_frame(native_id="wf-push", seq=1, phase="running", context="local",
                                  progress=0.4, interval_s=2.0, timeout_s=10.0))

        def reported() -> bool:
            hub.flush_heartbeats()
            return hub.runs[run_id].progress == 0.4

        await _until(reported, "the scoped pusher's beat")
        for seq in range(1, 31):
            refused.push(heartbeat_frame(native_id=f"other-{seq}", seq=seq, phase="running",
                                         context="local", progress=0.1))
            await asyncio.sleep(0.01)
        await _until(lambda: tg.gateway.stats()["refused"].get("out_of_scope", 0) >= 30,
                     "thirty refusals")
        await _until(lambda: len(refused.errors) >= 20, "the error frames")
    finally:
        await asyncio.to_thread(good.close)
        await asyncio.to_thread(refused.close)
    assert {e["code"] for e in refused.errors} == {"out_of_scope"}
    warnings = [r for r in caplog.records if "rejected a frame" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert good.errors == []
