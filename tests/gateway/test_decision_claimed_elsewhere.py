"""A decision on a gateway whose view has not caught up with a peer's decision of the same
interrupt (two gateways on one PostgreSQL journal, the ``pgserver`` wheel's server): the claim
in the journal refuses it, and the answer says the interrupt changed elsewhere (error
``interrupt_changed_elsewhere``, outcome ``conflict``, exit 4 in the CLI), naming the gateway.

A real in-process gateway B (its DBOS context's database does not exist, so the run and its
interrupt are put into its hub by the test); the peer gateway A is its journal, claiming the
interrupt as A's ``begin`` does."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.gateway.journal_engines import open_journal
from console.gateway.journal_store import Intent
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Decision, DecisionKind, Interrupt, Role, Run
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture

_databases = itertools.count()


@pytest.fixture
async def gateway_b(tmp_path: Path, postgres_server: PostgresServer
                    ) -> AsyncIterator[tuple[Gateway, str, str]]:
    name = f"elsewhere_{next(_databases)}"
    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = postgres_server.url(name)
    token = create_token(Role.OPERATOR, "bob", tmp_path)
    gw = Gateway(GatewaySettings(port=0, home=tmp_path, journal=url, gateway_id="gw-b",
                                 backends=[f"dbos+sqlite:///{tmp_path / 'none' / 'sys.db'}"
                                           "?context=one"]))
    await gw.start()
    try:
        yield gw, url, token
    finally:
        await gw.stop()


async def test_a_decision_taken_through_a_peer_first_is_interrupt_changed_elsewhere(
        gateway_b: tuple[Gateway, str, str]) -> None:
    gw, url, token = gateway_b
    run = Run(id="dbos:one/wf-1", backend="dbos", context="one", native_id="wf-1", name="wf")
    intr = Interrupt(id="dbos:one/wf-1#i1", run_id=run.id, native_id="i1", title="Deploy?")
    gw.hub.observe_runs([run])
    gw.hub.observe_interrupts("dbos:one", [intr], True, lambda _i: None)
    peer = open_journal(url, owner="gw-a")  # gateway A claims it (its begin), B shows pending
    try:
        peer.renew_liveness(60)  # A is alive: B leaves A's intent to A
        begun = peer.begin(Intent(key="alice-on-a", target=intr.id, action="approve",
                                  identity="alice", role="operator", reason="",
                                  claim_kind="approve", payload={
                                      "interrupt": intr.model_dump(mode="json"),
                                      "decision": {"kind": "approve"}}))
        assert begun.status != "conflict"
    finally:
        peer.close()
    async with GatewayClient(f"ws://127.0.0.1:{gw.port}", token) as bob:
        assert [i.id for i in bob.view.pending_interrupts()] == [intr.id]
        result = await bob.command("decide", [intr.id], decision=Decision(
            kind=DecisionKind.APPROVE), key="bob-on-b")
    assert result[0].outcome == "conflict"
    assert result[0].error == "interrupt_changed_elsewhere", result
    assert "alice" in result[0].detail and "gw-a" in result[0].detail
