"""An agent token speaks only for the runs of its scope, and only for runs bound to it.

Each test here was run against the gateway before scopes and binding existed and failed there
(the beats were accepted and changed the run)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from agent_wire import agent, beat
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from console.client import GatewayClient
from console.gateway import hello


async def _settled(tg, run_id: str):
    tg.gateway.hub.flush_heartbeats()
    return tg.gateway.hub.runs[run_id]


async def test_a_beat_outside_the_token_scope_is_refused(trust_gateway):
    tg = trust_gateway
    (other,) = tg.observe("wf-x", context="other")
    async with agent(tg.url, tg.tokens["agent-a"]) as a:
        error = await a.beat("wf-x", context="other", progress=0.01)
    assert error is not None and error["code"] == "out_of_scope"
    assert "dbos:local" in error["message"]
    assert (await _settled(tg, other)).progress is None


async def test_a_run_id_prefix_scope_covers_only_its_prefix(trust_gateway):
    tg = trust_gateway
    mine, theirs = tg.observe("team-a-1", "team-b-1")
    async with agent(tg.url, tg.tokens["team-a"]) as a:
        assert await a.beat("team-a-1", progress=0.3) is None
        error = await a.beat("team-b-1", progress=0.3)
    assert error is not None and error["code"] == "out_of_scope"
    assert (await _settled(tg, mine)).progress == 0.3
    assert (await _settled(tg, theirs)).progress is None


async def test_a_second_token_cannot_change_a_run_bound_to_the_first(trust_gateway):
    tg = trust_gateway
    (run_id,) = tg.observe("wf-1")
    held = [{"id": "gpu-0", "kind": "gpu", "on_pause": "keep", "state": "held"}]
    async with agent(tg.url, tg.tokens["agent-a"]) as a, \
            agent(tg.url, tg.tokens["agent-b"]) as b:
        assert await a.beat("wf-1", progress=0.6, resources=held) is None
        error = await b.beat("wf-1", progress=0.01, resources=[])
        assert error is not None and error["code"] == "bound_to_other"
        assert "agent-a" not in error["message"]  # the other token's name is not told
        refusal = tg.gateway.journal.audit_entries(limit=1)[0]
        assert refusal.identity == "agent-b" and "bound to agent-a" in refusal.detail
        # the unscoped legacy token is bound just the same
        assert (await b.beat("wf-1", progress=0.02))["code"] == "bound_to_other"
        legacy_error = None
        async with agent(tg.url, tg.tokens["legacy"]) as legacy:
            legacy_error = await legacy.beat("wf-1", progress=0.03)
        assert legacy_error is not None and legacy_error["code"] == "bound_to_other"
        run = await _settled(tg, run_id)
        assert run.progress == 0.6
        assert [r.id for r in run.resources] == ["gpu-0"]
        # the bound token keeps reporting
        assert await a.beat("wf-1", progress=0.7, resources=held) is None
    assert (await _settled(tg, run_id)).progress == 0.7


async def test_a_forged_pause_report_does_not_confirm_a_release(trust_gateway):
    tg = trust_gateway
    hub = tg.gateway.hub
    (run_id,) = tg.observe("wf-2")
    held = [{"id": "lock-1", "kind": "lock", "on_pause": "release", "state": "held"}]
    released = [{**held[0], "state": "released"}]
    async with agent(tg.url, tg.tokens["agent-a"]) as a, \
            agent(tg.url, tg.tokens["agent-b"]) as b:
        assert await a.beat("wf-2", resources=held) is None
        hub.expect_release(run_id, "pause", {"lock-1"}, 30)
        error = await b.beat("wf-2", phase="paused", resources=released)
        assert error is not None and error["code"] == "bound_to_other"
        assert run_id in hub.release_checks  # not confirmed by the forger
        assert await a.beat("wf-2", phase="paused", resources=released) is None
        assert run_id not in hub.release_checks  # the bound agent's report confirms


@pytest.mark.parametrize(
    ("fields", "code", "names"),
    [
        ({"at": "2100-01-01T00:00:00+00:00"}, "invalid", "ahead of the gateway"),
        ({"seq": 2**62}, "invalid", "seq"),
        ({"seq": -1}, "invalid", "seq"),
        ({"progress": 1.5}, "invalid", "progress"),
        ({"progress": -0.1}, "invalid", "progress"),
        ({"timeout_s": 1e9}, "invalid", "timeout_s"),
        ({"interval_s": 1e7}, "invalid", "interval_s"),
        ({"interval_s": 0}, "invalid", "interval_s"),
    ],
)
async def test_out_of_range_beats_are_refused_and_do_not_freeze_the_run(
        trust_gateway, fields, code, names):
    tg = trust_gateway
    (run_id,) = tg.observe("wf-3")
    async with agent(tg.url, tg.tokens["agent-a"]) as a:
        assert await a.beat("wf-3", progress=0.4) is None
        error = await a.beat("wf-3", **fields)
        assert error is not None and error["code"] == code, error
        assert names in error["message"]
        # the real beats that follow are still heard
        assert await a.beat("wf-3", progress=0.5) is None
    run = await _settled(tg, run_id)
    assert run.progress == 0.5
    assert run.heartbeat_at is not None and run.heartbeat_at < datetime.now(UTC) + timedelta(
        seconds=31)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_non_finite_numbers_anywhere_in_a_beat_are_refused(trust_gateway, literal):
    tg = trust_gateway
    (run_id,) = tg.observe("wf-4")
    async with agent(tg.url, tg.tokens["agent-a"]) as a:
        for field in ("progress", "interval_s", "timeout_s"):
            raw = json.dumps(beat("wf-4", **{field: 0.25})).replace("0.25", literal)
            error = await a.send_raw(raw)
            assert error is not None and error["code"] == "malformed", (field, error)
        nested = json.dumps(beat("wf-4", details={"loss": 0.25})).replace("0.25", literal)
        assert (await a.send_raw(nested))["code"] == "malformed"
    assert (await _settled(tg, run_id)).progress is None


async def test_refused_beats_are_counted_and_audited_in_summary(trust_gateway):
    tg = trust_gateway
    tg.observe("wf-5", context="other")
    async with agent(tg.url, tg.tokens["agent-b"]) as b:
        for i in range(50):
            assert (await b.beat("wf-5", context="other", seq=i))["code"] == "out_of_scope"
    tg.gateway.refusals.flush(force=True)
    entries = tg.gateway.journal.audit_entries(limit=1000)
    mine = [e for e in entries if e.identity == "agent-b"]
    assert len(mine) == 2, [e.detail for e in mine]  # the first one, then one summary
    assert "and 49 more refused" in mine[0].detail
    assert tg.gateway.stats()["refused"]["out_of_scope"] == 50


async def test_operators_and_admins_do_not_push_beats(trust_gateway):
    tg = trust_gateway
    for role in ("operator", "admin", "viewer"):
        with pytest.raises(InvalidStatus) as info:
            async with connect(tg.url + "/agent",
                               additional_headers={"Authorization": f"Bearer {tg.tokens[role]}"}):
                pass
        assert info.value.response.status_code == 403, role


async def test_the_agent_channel_closes_a_connection_without_hello(trust_gateway, monkeypatch):
    monkeypatch.setattr(hello, "HELLO_TIMEOUT_S", 0.5)
    headers = {"Authorization": f"Bearer {trust_gateway.tokens['agent-a']}"}
    async with connect(trust_gateway.url + "/agent", additional_headers=headers) as ws:
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 10)  # the gateway closes it, nothing is sent
    assert info.value.rcvd is not None and info.value.rcvd.code == 1008


async def test_stats_are_visible_to_clients(trust_gateway):
    async with GatewayClient(trust_gateway.url, trust_gateway.tokens["viewer"]) as client:
        stats = await client.query("stats")
    assert stats["unknown_beats"]["max_runs"] > 0
