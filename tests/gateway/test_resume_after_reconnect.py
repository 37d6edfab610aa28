"""A client that reconnects resumes from its last sequence number and misses no event."""

from __future__ import annotations

import asyncio

from console.client import FleetView, GatewayClient


async def _audit_events(n: int, client: GatewayClient, tag: str) -> None:
    for i in range(n):
        await client.command("pause", [f"dbos:local/{tag}-{i}"], reason=tag)


async def _drain(client: GatewayClient, want_seq: int) -> None:
    while client.view.seq < want_seq:
        batch = await asyncio.wait_for(client.updates(), 5)
        assert batch is not None


async def test_reconnecting_client_gets_exactly_the_missed_events(gateway):
    token = gateway.tokens["operator"]
    watcher = GatewayClient(gateway.url, token)
    await watcher.connect()
    async with GatewayClient(gateway.url, token, subscribe=False) as actor:
        await _audit_events(3, actor, "before")
        await _drain(watcher, gateway.gateway.hub.seq)
        view: FleetView = watcher.view
        seen_before = view.seq
        await watcher.close()
        await _audit_events(5, actor, "while-away")
    resumed = GatewayClient(gateway.url, token, view=view)
    await resumed.connect()
    first = await asyncio.wait_for(resumed.updates(), 5)
    assert first is not None and first[0]["kind"] == "audit"
    seqs = [e["seq"] for e in first]
    assert seqs == list(range(seen_before + 1, gateway.gateway.hub.seq + 1))
    targets = [e["data"]["target"] for e in first]
    assert targets == [f"dbos:local/while-away-{i}" for i in range(5)]
    assert len(view.audit) == 8
    await resumed.close()


async def test_a_client_from_an_older_epoch_gets_a_fresh_snapshot(gateway):
    token = gateway.tokens["operator"]
    view = FleetView(epoch="gone-gateway", seq=99)
    async with GatewayClient(gateway.url, token, view=view) as client:
        assert client.view.epoch == gateway.gateway.hub.epoch
        assert client.view.seq == gateway.gateway.hub.seq


async def test_a_client_too_far_behind_gets_a_snapshot(gateway):
    hub = gateway.gateway.hub
    for i in range(10):
        hub.publish("notice", {"level": "info", "message": str(i)})
    hub.log.popleft()
    hub.log.popleft()  # the log no longer reaches back to event 2
    view = FleetView(epoch=hub.epoch, seq=1)
    async with GatewayClient(gateway.url, gateway.tokens["viewer"], view=view) as client:
        first = await asyncio.wait_for(client.updates(), 5)
        assert first == [{"kind": "snapshot", "seq": hub.seq}]
        assert client.view.seq == hub.seq
