"""Tokens shared by two gateways on one PostgreSQL journal (console/gateway/shared_tokens.py):
two real in-process gateways, each with its own IRQ_HOME (tokens.json), on one database of the
real PostgreSQL test server. A token created on A's host is accepted by B within seconds; a
revocation on A's host closes the token's connection on B and refuses it there. ``irq token
list --journal`` on B's host shows A's tokens with their origin (never a token), and ``irq
token revoke --journal`` there revokes A's token for both gateways, A's own file notwithstanding."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from console.cli.app import app
from console.client import GatewayClient, GatewayError, Unauthorized
from console.gateway.auth import create_token, revoke_tokens, token_id, tokens_path
from console.gateway.journal_engines import open_journal
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.gateway.shared_tokens import SharedTokens
from console.model import Role
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.cli.cli_harness import on_a_terminal
from tests.gateway.pg_journals import fresh_database


@pytest.fixture
async def pair(tmp_path: Path, postgres_server: PostgresServer
               ) -> AsyncIterator[tuple[Gateway, Gateway]]:
    journal = fresh_database(postgres_server)
    started: list[Gateway] = []
    try:
        for name in ("gw-a", "gw-b"):
            home = tmp_path / name
            home.mkdir()
            gw = Gateway(GatewaySettings(port=0, home=home, journal=journal, gateway_id=name,
                                         flush_interval_s=0.02))
            await gw.start()
            started.append(gw)
        yield started[0], started[1]
    finally:
        for gw in started:
            await gw.stop()


# How long a wait may take before the test gives up: a guard against hanging, not a claim
# about speed (how fast tokens are shared belongs in a benchmark).
PATIENCE_S = 60.0


async def _connects(url: str, token: str) -> None:
    began = time.monotonic()
    while True:
        try:
            async with GatewayClient(url, token):
                return
        except Unauthorized:
            assert time.monotonic() - began < PATIENCE_S, "token never accepted"
            await asyncio.sleep(0.1)


async def _refused(url: str, token: str) -> None:
    """Wait until the gateway at ``url`` refuses ``token`` as revoked."""
    began = time.monotonic()
    while True:
        try:
            async with GatewayClient(url, token):
                pass
        except Unauthorized as exc:
            assert "revoked" in str(exc)
            return
        assert time.monotonic() - began < PATIENCE_S, f"{url} still accepts the revoked token"
        await asyncio.sleep(0.1)


async def test_a_token_minted_on_one_gateway_works_on_the_other_and_its_revocation_too(
        pair: tuple[Gateway, Gateway]) -> None:
    a, b = pair
    b_url = f"ws://127.0.0.1:{b.port}"
    token = create_token(Role.OPERATOR, "olga", a.settings.home)
    await _connects(b_url, token)
    entry = json.loads(tokens_path(a.settings.home).read_text())[0]
    assert not tokens_path(b.settings.home).exists()  # B's own file is not written
    async with GatewayClient(b_url, token) as olga:
        revoke_tokens([token_id(entry)], a.settings.home)
        await _dropped(olga, "B")
    with pytest.raises(Unauthorized):
        async with GatewayClient(b_url, token):
            pass


async def _dropped(client: GatewayClient, where: str) -> None:
    """The gateway closes the client's connection (its token was revoked)."""
    began = time.monotonic()
    while True:
        try:
            await asyncio.wait_for(client.ping(), 2)
        except (GatewayError, TimeoutError):
            return
        assert time.monotonic() - began < PATIENCE_S, f"{where} kept the revoked token's connection"
        await asyncio.sleep(0.1)


def _irq(home: Path, *args: str) -> tuple[int, str, str]:
    """``irq ARGS`` on the host whose IRQ_HOME is ``home``."""
    result = CliRunner().invoke(app, list(args), env={"IRQ_HOME": str(home)},
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


async def _listed(home: Path, journal: str, *names: str) -> dict[str, dict]:
    """``irq token list --journal -o json`` on that host, once it lists every name shared."""
    began = time.monotonic()
    while True:
        code, out, err = _irq(home, "token", "list", "--journal", journal, "-o", "json")
        assert code == 0, err
        listed = {e["identity"]: e for e in json.loads(out)}
        if all(listed.get(n, {}).get("origin") for n in names):
            return listed
        assert time.monotonic() - began < PATIENCE_S, f"never shared: {names} in {listed}"
        await asyncio.sleep(0.2)


async def test_token_list_with_the_journal_shows_the_other_gateways_tokens_and_their_origin(
        pair: tuple[Gateway, Gateway]) -> None:
    a, b = pair
    journal = a.settings.journal
    olga = create_token(Role.OPERATOR, "olga", a.settings.home)
    bert = create_token(Role.AGENT, "bert", b.settings.home, scopes=["dbos:local"])
    listed = await _listed(b.settings.home, journal, "olga", "bert")
    assert {n: (e["local"], e["origin"], e["role"], e["state"]) for n, e in listed.items()} == {
        "olga": (False, "gw-a", "operator", "active"),  # A's, shared through the journal
        "bert": (True, "gw-b", "agent", "active")}  # B's own file (and shared by B)
    assert listed["olga"]["prefix"] == olga[:10] and listed["bert"]["scopes"] == ["dbos:local"]
    code, out, _ = _irq(b.settings.home, "token", "list", "--journal", journal)
    assert code == 0 and "gw-a (shared)" in out and "this host" in out
    for secret in (olga, bert):  # never a token, in any form
        for fmt in ("json", "text"):
            assert secret not in _irq(b.settings.home, "token", "list", "--journal", journal,
                                      "-o", fmt)[1]
    code, out, _ = _irq(b.settings.home, "token", "list", "-o", "json")  # no journal: the file
    assert code == 0 and [(e["identity"], e["origin"]) for e in json.loads(out)] == [
        ("bert", None)]


async def test_revoking_a_token_shared_by_another_gateway_refuses_it_on_both(
        pair: tuple[Gateway, Gateway]) -> None:
    a, b = pair
    journal = a.settings.journal
    token = create_token(Role.OPERATOR, "olga", a.settings.home)
    canary = create_token(Role.OPERATOR, "canary", a.settings.home)  # revoked after the refusals
    await _connects(f"ws://127.0.0.1:{b.port}", token)
    await _connects(f"ws://127.0.0.1:{b.port}", canary)
    async with GatewayClient(f"ws://127.0.0.1:{a.port}", token) as on_a, \
            GatewayClient(f"ws://127.0.0.1:{b.port}", token) as on_b, \
            GatewayClient(f"ws://127.0.0.1:{a.port}", canary) as canary_a, \
            GatewayClient(f"ws://127.0.0.1:{b.port}", canary) as canary_b:
        code, _, err = _irq(b.settings.home, "token", "revoke", "olga", "--yes")  # B's file
        assert code == 3, err
        code, _, err = _irq(b.settings.home, "token", "revoke", "olga", "--journal", journal)
        assert code == 2 and "--yes" in err  # no terminal to confirm on: nothing revoked
        code, screen = await asyncio.to_thread(  # on a terminal: shows it, asks, default No
            on_a_terminal, "token", "revoke", "olga", "--journal", journal,
            env={"IRQ_HOME": str(b.settings.home)}, answer="")
        assert code == 1 and "nothing done" in screen, screen
        assert f"olga (operator, {token[:10]}, gw-a (shared), last use" in screen, screen
        assert "revoke this token on every gateway of the journal? " in screen, screen
        assert token not in screen
        # nothing was revoked: a revocation made after those refusals (the canary's) closes
        # the canary's connections on both gateways, and olga's stay open
        code, _, err = _irq(b.settings.home, "token", "revoke", "canary", "--yes",
                            "--journal", journal)
        assert code == 0, err
        await asyncio.gather(_dropped(canary_a, "A"), _dropped(canary_b, "B"))
        await asyncio.gather(on_a.ping(), on_b.ping())
        code, out, err = _irq(b.settings.home, "token", "revoke", "olga", "--yes",
                              "--journal", journal, "-o", "json")
        assert code == 0, err
        (done,) = json.loads(out)
        assert (done["identity"], done["state"], done["everywhere"], done["local"],
                done["origin"]) == ("olga", "revoked", True, False, "gw-a")
        await asyncio.gather(_dropped(on_a, "A"), _dropped(on_b, "B"))
    for gw in (a, b):  # A refuses it too, although its own tokens.json still holds it
        with pytest.raises(Unauthorized, match="revoked"):
            async with GatewayClient(f"ws://127.0.0.1:{gw.port}", token):
                pass
    entries = json.loads(tokens_path(a.settings.home).read_text())
    assert [e["identity"] for e in entries] == ["olga", "canary"]
    assert not any("revoked_at" in e for e in entries)
    code, out, _ = _irq(a.settings.home, "token", "list", "--journal", journal, "-o", "json")
    assert [(e["identity"], e["local"], e["state"]) for e in json.loads(out)] == [
        ("olga", True, "revoked"), ("canary", True, "revoked")]
    code, _, err = _irq(b.settings.home, "token", "revoke", "olga", "--yes", "--journal", journal)
    assert code == 4 and "only revoked tokens" in err


async def test_a_revocation_only_in_a_stopped_gateways_file_reaches_the_others_with_journal(
        pair: tuple[Gateway, Gateway], tmp_path: Path) -> None:
    a, _ = pair
    host_c = tmp_path / "host-c"  # a third gateway's host: it shared its token, then stopped
    host_c.mkdir()
    token = create_token(Role.OPERATOR, "carl", host_c)
    canary = create_token(Role.OPERATOR, "canary", host_c)  # revoked through the journal
    journal = open_journal(a.settings.journal)
    try:
        SharedTokens(journal, "gw-c").sync(json.loads(tokens_path(host_c).read_text()))
    finally:
        journal.close()
    await _connects(f"ws://127.0.0.1:{a.port}", token)
    await _connects(f"ws://127.0.0.1:{a.port}", canary)
    code, _, err = _irq(host_c, "token", "revoke", "carl", "--yes")  # the file only
    assert code == 0, err
    # no gateway copies C's file: once A has taken in a revocation made after that one (the
    # canary's, through the journal), it still accepts carl's token
    code, _, err = _irq(host_c, "token", "revoke", "canary", "--yes", "--journal",
                        a.settings.journal)
    assert code == 0, err
    await _refused(f"ws://127.0.0.1:{a.port}", canary)
    async with GatewayClient(f"ws://127.0.0.1:{a.port}", token):
        pass
    code, out, err = _irq(host_c, "token", "revoke", "carl", "--yes", "--journal",
                          a.settings.journal, "-o", "json")
    assert code == 0, err  # revoked here, not yet there: not "nothing to do"
    (done,) = json.loads(out)
    assert (done["everywhere"], done["local"], done["origin"]) == (True, True, "gw-c")
    await _refused(f"ws://127.0.0.1:{a.port}", token)


def test_an_unreachable_journal_lists_this_hosts_tokens_and_exits_6(tmp_path: Path) -> None:
    create_token(Role.VIEWER, "local-one", tmp_path)
    nowhere = "postgresql://irq:S3cret-pw@127.0.0.1:1/irq"
    code, out, err = _irq(tmp_path, "token", "list", "--journal", nowhere, "-o", "json")
    assert code == 6 and [e["identity"] for e in json.loads(out)] == ["local-one"]
    assert "only this host's tokens" in err and "S3cret-pw" not in err
    code, _, err = _irq(tmp_path, "token", "revoke", "local-one", "--yes", "--journal", nowhere)
    assert code == 6 and "nothing revoked" in err and "S3cret-pw" not in err
    assert json.loads(tokens_path(tmp_path).read_text())[0].get("revoked_at") is None
    code, _, err = _irq(tmp_path, "token", "list", "--journal", str(tmp_path / "gateway.db"))
    assert code == 2 and "postgresql://" in err
