"""Commands and client frames are bounded: caps with errors naming them, budgets per
connection and per identity, and refusals audited in summary (a viewer cannot flood the
audit trail)."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from console.client import GatewayClient, GatewayError
from console.gateway.auth import create_token
from console.gateway.protocol import MAX_REASON_CHARS, MAX_TARGETS
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role


async def test_too_many_targets_is_invalid_and_names_the_cap(gateway):
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        targets = [f"dbos:local/wf-{i}" for i in range(MAX_TARGETS + 1)]
        with pytest.raises(GatewayError) as info:
            await client.command("cancel", targets, reason="x")
    assert info.value.code == "invalid"
    assert f"at most {MAX_TARGETS}" in str(info.value) and f"got {MAX_TARGETS + 1}" in str(
        info.value)


async def test_a_too_long_reason_is_invalid_and_names_the_cap(gateway):
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        with pytest.raises(GatewayError) as info:
            await client.command("cancel", ["dbos:local/wf"], reason="r" * (MAX_REASON_CHARS + 1))
    assert info.value.code == "invalid"
    assert f"reason: at most {MAX_REASON_CHARS} characters (got {MAX_REASON_CHARS + 1})" in str(
        info.value)


async def test_a_viewer_flood_of_refused_cancels_writes_two_audit_rows_not_50000(gateway):
    targets = [f"dbos:local/made-up-{i}" for i in range(1000)]
    async with GatewayClient(gateway.url, gateway.tokens["viewer"]) as viewer:
        for _ in range(50):
            results = await viewer.command("cancel", targets, reason="z" * 2000)
            assert len(results) == 1000 and {r.outcome for r in results} == {"forbidden"}
    gateway.gateway.refusals.flush(force=True)
    rows = gateway.gateway.journal.audit_entries(limit=100_000)
    assert len(rows) == 2, [r.detail[:80] for r in rows]
    first, summary = rows[1], rows[0]
    assert first.outcome == "forbidden" and first.identity == "viewer-test"
    assert "1000 targets" in first.detail
    assert summary.outcome == "refused" and "and 49 more refused" in summary.detail
    assert "49000 targets" in summary.detail
    assert len(summary.reason) == 0  # the summary does not repeat 49 reasons


@pytest.fixture
async def tight(tmp_path, monkeypatch):
    """A gateway with small budgets, so the tests reach them in a few frames."""
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    tokens = {r: create_token(Role(r), f"{r}-t", tmp_path) for r in ("operator", "viewer")}
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, flush_interval_s=0.02,
                                 commands_per_s=0.01, commands_burst=3,
                                 client_frames_per_s=0.01, client_frames_burst=20,
                                 client_identity_frames_per_s=0.01,
                                 client_identity_frames_burst=30))
    await gw.start()
    try:
        yield gw, f"ws://127.0.0.1:{gw.port}", tokens
    finally:
        await gw.stop()


async def test_commands_over_the_identity_budget_are_refused_across_connections(tight):
    gw, url, tokens = tight
    outcomes = []
    for _ in range(2):  # a second connection of the same identity shares the budget
        async with GatewayClient(url, tokens["operator"]) as client:
            for _ in range(3):
                try:
                    await client.command("pause", ["dbos:local/wf"], dry_run=True)
                    outcomes.append("answered")
                except GatewayError as exc:
                    outcomes.append(exc.code)
    assert outcomes == ["answered"] * 3 + ["rate_limited"] * 3
    async with GatewayClient(url, tokens["viewer"]) as other:  # another identity is not hit
        await other.command("pause", ["dbos:local/wf"], dry_run=True)


async def test_frames_over_the_connection_budget_get_rate_limited_and_the_rest_is_answered(tight):
    gw, url, tokens = tight
    headers = {"Authorization": f"Bearer {tokens['viewer']}"}
    async with connect(url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1, "subscribe": False}))
        for i in range(40):
            await ws.send(json.dumps({"type": "ping", "id": str(i)}))
        replies = []
        while len(replies) < 40:
            reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if reply["type"] in ("pong", "error"):
                replies.append(reply)
    pongs = [r for r in replies if r["type"] == "pong"]
    limited = [r for r in replies if r.get("code") == "rate_limited"]
    assert len(pongs) == 20 and len(limited) == 20  # the burst, then the refusals
    assert {r["ref"] for r in limited} == {str(i) for i in range(20, 40)}
    gw.refusals.flush(force=True)
    assert len([e for e in gw.journal.audit_entries(limit=100) if e.identity == "viewer-t"]) == 2


async def _pings(ws, n: int, tag: str) -> list[dict]:
    for i in range(n):
        await ws.send(json.dumps({"type": "ping", "id": f"{tag}{i}"}))
    replies = []
    while len(replies) < n:
        reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if reply["type"] in ("pong", "error"):
            replies.append(reply)
    return replies


async def test_more_connections_do_not_buy_an_identity_more_frames(tight):
    gw, url, tokens = tight
    headers = {"Authorization": f"Bearer {tokens['viewer']}"}
    async with connect(url, additional_headers=headers) as one, \
            connect(url, additional_headers=headers) as two:
        for ws in (one, two):
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "subscribe": False}))
        first = await _pings(one, 15, "a")  # within both budgets
        second = await _pings(two, 20, "b")  # within its connection's, not the identity's
    assert all(r["type"] == "pong" for r in first)
    # pongs come from request tasks, refusals from the reader: compare by id, not by order
    assert {r["id"] for r in second if r["type"] == "pong"} == {f"b{i}" for i in range(15)}
    limited = [r for r in second if r["type"] == "error"]
    assert {r["ref"] for r in limited} == {f"b{i}" for i in range(15, 20)}
    assert {r["code"] for r in limited} == {"rate_limited"}
