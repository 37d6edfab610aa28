"""Tokens shared by two gateways on one PostgreSQL journal (console/gateway/shared_tokens.py):
two real in-process gateways, each with its own IRQ_HOME (tokens.json), on one database of the
real PostgreSQL test server. A token created on A's host is accepted by B within seconds; a
revocation on A's host closes the token's connection on B and refuses it there."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.client import GatewayClient, GatewayError, Unauthorized
from console.gateway.auth import create_token, revoke_tokens, token_id, tokens_path
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture


@pytest.fixture
async def pair(tmp_path: Path, postgres_server: PostgresServer
               ) -> AsyncIterator[tuple[Gateway, Gateway]]:
    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute('CREATE DATABASE "tokens"')
    started: list[Gateway] = []
    try:
        for name in ("gw-a", "gw-b"):
            home = tmp_path / name
            home.mkdir()
            gw = Gateway(GatewaySettings(port=0, home=home, journal=postgres_server.url(
                "tokens"), gateway_id=name, flush_interval_s=0.02))
            await gw.start()
            started.append(gw)
        yield started[0], started[1]
    finally:
        for gw in started:
            await gw.stop()


async def _connects(url: str, token: str, within_s: float = 5.0) -> float:
    began = time.monotonic()
    while True:
        try:
            async with GatewayClient(url, token):
                return time.monotonic() - began
        except Unauthorized:
            assert time.monotonic() - began < within_s, "token not accepted in time"
            await asyncio.sleep(0.1)


async def test_a_token_minted_on_one_gateway_works_on_the_other_and_its_revocation_too(
        pair: tuple[Gateway, Gateway]) -> None:
    a, b = pair
    b_url = f"ws://127.0.0.1:{b.port}"
    token = create_token(Role.OPERATOR, "olga", a.settings.home)
    took = await _connects(b_url, token)
    assert took < 4.0, took
    entry = json.loads(tokens_path(a.settings.home).read_text())[0]
    assert not tokens_path(b.settings.home).exists()  # B's own file is not written
    async with GatewayClient(b_url, token) as olga:
        revoke_tokens([token_id(entry)], a.settings.home)
        began = time.monotonic()
        while True:  # B closes the revoked token's connection
            try:
                await asyncio.wait_for(olga.ping(), 2)
            except (GatewayError, TimeoutError):
                break
            assert time.monotonic() - began < 6.0, "B kept the revoked token's connection"
            await asyncio.sleep(0.1)
    with pytest.raises(Unauthorized):
        async with GatewayClient(b_url, token):
            pass
