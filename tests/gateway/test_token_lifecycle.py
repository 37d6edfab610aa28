"""Token lifecycle on a running gateway: a token past its ttl is refused with 401 "expired",
a revoked one with 401 "revoked" at the next handshake and its open connection is closed,
the last use is recorded at the handshake (throttled), and ``irq token list`` names them."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from console.cli.app import app
from console.client import GatewayClient, Unauthorized
from console.gateway.auth import (
    TokenStore,
    create_token,
    read_last_use,
    tokens_path,
)
from console.model import Role


async def _refusal(url: str, token: str) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as info:
        async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}):
            pass
    response = info.value.response
    return response.status_code, (response.body or b"").decode()


async def _closed_within(client: GatewayClient, seconds: float) -> bool:
    """True when the gateway closes the client's connection within ``seconds``."""
    async def drained() -> None:
        while await client.updates() is not None:
            pass

    try:
        await asyncio.wait_for(drained(), seconds)
    except TimeoutError:
        return False
    return True


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


async def test_an_expired_token_gets_401_expired_and_its_connection_closes(gateway):
    token = create_token(Role.VIEWER, "short-lived", gateway.home, ttl_s=1.5)
    client = GatewayClient(gateway.url, token)
    await client.connect()  # good while its ttl runs
    try:
        assert await _closed_within(client, 4.0), "the expired token's connection stayed open"
    finally:
        await client.close()
    status, body = await _refusal(gateway.url, token)
    assert status == 401 and body.startswith("expired")
    with pytest.raises(Unauthorized, match="expired"):
        async with GatewayClient(gateway.url, token):
            pass
    code, out, _ = _cli("token", "list", "-o", "json")
    listed = {e["identity"]: e for e in json.loads(out)}
    assert code == 0 and listed["short-lived"]["state"] == "expired"
    assert listed["short-lived"]["expires_at"] is not None


async def test_a_revoked_token_is_refused_at_once_and_disconnected(gateway):
    token = create_token(Role.OPERATOR, "leaving-soon", gateway.home)
    other = gateway.tokens["operator"]
    client = GatewayClient(gateway.url, token)
    await client.connect()
    try:
        code, _, err = _cli("token", "revoke", "leaving-soon", "--yes")
        assert code == 0, err
        assert "revoked operator token 'leaving-soon'" in err
        status, body = await _refusal(gateway.url, token)  # the very next handshake
        assert status == 401 and body.startswith("revoked")
        assert await _closed_within(client, 3.0), "the revoked token's connection stayed open"
    finally:
        await client.close()
    async with GatewayClient(gateway.url, other) as still_good:  # other tokens are untouched
        assert still_good.identity == "operator-test"
    code, _, err = _cli("token", "revoke", "leaving-soon", "--yes")
    assert code == 4 and "only revoked tokens" in err
    code, _, err = _cli("token", "revoke", "no-such-token", "--yes")
    assert code == 3


async def test_revoke_by_prefix_asks_first_and_refuses_without_a_terminal(gateway):
    token = create_token(Role.VIEWER, "by-prefix", gateway.home)
    code, _, err = _cli("token", "revoke", token[:10])  # stdin is not a terminal, no --yes
    assert code == 2 and "--yes" in err
    async with GatewayClient(gateway.url, token):  # nothing was revoked
        pass
    code, _, _ = _cli("token", "revoke", token[:10], "--yes")
    assert code == 0
    status, _ = await _refusal(gateway.url, token)
    assert status == 401


async def test_last_use_is_recorded_at_the_handshake_and_listed(gateway):
    token = create_token(Role.VIEWER, "used-once", gateway.home, ttl_s=8 * 3600)
    create_token(Role.VIEWER, "never-used", gateway.home)
    async with GatewayClient(gateway.url, token):
        pass
    code, out, _ = _cli("token", "list", "-o", "json")
    assert code == 0
    listed = {e["identity"]: e for e in json.loads(out)}
    assert {"used-once", "never-used", "viewer-test", "operator-test"} <= listed.keys()
    used = listed["used-once"]
    assert used["last_used_at"] is not None and used["role"] == "viewer"
    assert used["expires_at"] is not None and used["state"] == "active"
    assert used["prefix"] == token[:10]
    assert listed["never-used"]["last_used_at"] is None
    assert read_last_use(gateway.home)[used["id"]] == used["last_used_at"]
    code, text, _ = _cli("token", "list")
    assert "used-once" in text and "never" in text and "LAST USE" in text
    from console.cli.tokens import _complete_names

    assert _complete_names("used") == ["used-once"]  # `irq token revoke <TAB>`


def test_last_use_writes_are_throttled(tmp_path):
    token = create_token(Role.VIEWER, "busy", tmp_path)
    store = TokenStore(tokens_path(tmp_path))
    who = store.authenticate(token)
    assert who is not None
    assert store.record_use(who, now=100.0) is True
    assert store.record_use(who, now=110.0) is False  # a reconnect storm is not a write storm
    assert store.record_use(who, now=161.0) is True
    assert who.token_id in read_last_use(tmp_path)
