"""Four-eyes approvals on two gateways sharing one PostgreSQL journal (the ``pgserver``
wheel's server).

In the journal: two approvers, each on their own gateway, approving at the same moment an
interrupt that needs two approvals. Counted under the interrupt's advisory lock
(``ApprovalStore.record_unless_last``), exactly one of them is the last approval (and goes on
to the decision claim); the other is recorded. Before, both could count the other's approval
as missing and both be recorded, leaving an interrupt with two approvals and no decision.

End to end: two real ``irq serve --policy`` processes on one journal, the policy file's rule
requiring two approvers for a prod deploy, and a real DBOS agent (SQLite) whose guarded tool
call raises the interrupt. One operator approving on both gateways at once counts once; a
second operator's approval on the other gateway is delivered, and the agent's own record shows
the tool ran once, on one decision message.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from governed_fleet import interrupt_where, later_recv_polls, pending_interrupt

from console.client import GatewayClient, Unauthorized
from console.gateway.approval_store import ApprovalStore, RecordedCommand
from console.gateway.auth import create_token
from console.model import CommandResult, Decision, DecisionKind, Role
from devtools.dbos_record import read_record
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import OpenJournal, fresh_database
from tests.gateway.pg_journals import pg_journal as pg_journal  # the fixture
from tests.support.crashable_gateway import CrashableGateway, gateway_pair, stop_cleanly
from tests.support.dbos_policy_fleet import PolicyAgent

RULE = "prod-deploy-four-eyes"
FOUR_EYES_POLICY = f"""
default = "permit"

[tools]
deploy = ["release"]

[tool_classes]
release = []

[[rules]]
id = "{RULE}"
modality = "require_approval"
action = ["deploy"]
condition = 'args.environment == "prod"'
approvers = 2
decisions = ["approve", "edit", "reject"]
description = "a prod deploy needs two different approvers"
"""
APPROVE = Decision(kind=DecisionKind.APPROVE)


def _command(key: str) -> object:
    return lambda n: RecordedCommand(key=key, role="operator", reason="", detail=f"{n} of 2")


def test_two_approvers_on_two_gateways_at_once_give_exactly_one_last_approval(
        pg_journal: OpenJournal) -> None:
    stores = [ApprovalStore(pg_journal("gw-a")), ApprovalStore(pg_journal("gw-b"))]
    for round_ in range(20):
        iid = f"dbos:one/wf-{round_}#i1"
        barrier = threading.Barrier(2)
        results: dict[str, object] = {}

        def approve(store: ApprovalStore, who: str, barrier: threading.Barrier = barrier,
                    iid: str = iid, results: dict[str, object] = results) -> None:
            barrier.wait()
            results[who] = store.record_unless_last(
                iid, who, needed=2, kind="approve", args={}, rule="deploys",
                command=_command(f"{who}-{iid}"))  # type: ignore[arg-type]

        threads = [threading.Thread(target=approve, args=(s, w))
                   for s, w in zip(stores, ("alice", "bob"), strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        kinds = sorted("last" if r == "last" else "recorded" for r in results.values())
        assert kinds == ["last", "recorded"], (round_, results)
        assert len(stores[0].approvals(iid)) == 1  # the last one is written with its intent


def test_a_repeat_approval_through_the_other_gateway_is_refused(pg_journal: OpenJournal) -> None:
    a, b = ApprovalStore(pg_journal("gw-a")), ApprovalStore(pg_journal("gw-b"))
    iid = "dbos:one/wf-r#i1"
    first = a.record_unless_last(iid, "alice", needed=3, kind="approve", args={}, rule="r",
                                 command=_command("k1"))  # type: ignore[arg-type]
    assert isinstance(first, RecordedCommand) and first.detail == "1 of 2"
    again = b.record_unless_last(iid, "alice", needed=3, kind="approve", args={}, rule="r",
                                 command=_command("k2"))  # type: ignore[arg-type]
    assert again is None
    second = b.record_unless_last(iid, "bob", needed=3, kind="approve", args={}, rule="r",
                                  command=_command("k3"))  # type: ignore[arg-type]
    assert isinstance(second, RecordedCommand) and second.detail == "2 of 2"
    assert a.record_unless_last(iid, "carol", needed=3, kind="approve", args={}, rule="r",
                                command=_command("k4")) == "last"  # type: ignore[arg-type]


@pytest.fixture
def governed_pair(tmp_path: Path, postgres_server: PostgresServer
                  ) -> Iterator[tuple[CrashableGateway, CrashableGateway, PolicyAgent]]:
    """Gateways A and B (``irq serve --policy``, the four-eyes rule) on one fresh journal, both
    with the DBOS agent's database as their backend; the agent takes its policy from A."""
    journal = fresh_database(postgres_server)
    policy = tmp_path / "policy.toml"
    policy.write_text(FOUR_EYES_POLICY)
    agent_root = tmp_path / "agent"
    backend = f"dbos+sqlite:///{agent_root / 'sys.db'}?poll=0.3"
    gateways = gateway_pair(tmp_path, backend, journal, policy=policy)
    a, b = gateways
    agent: PolicyAgent | None = None
    try:
        a.start()
        b.start()
        token = create_token(Role.AGENT, "deploy-agent", a.home, scopes=["dbos:local"])
        agent = PolicyAgent(agent_root, {"IRQ_AGENT_URL": f"{a.url}/agent",
                                         "IRQ_AGENT_TOKEN": token, "IRQ_AGENT_CONTEXT": "local"})
        agent.start()
        yield a, b, agent
    finally:
        if agent is not None:
            agent.stop()
        stop_cleanly(gateways)


async def _accepted(url: str, token: str, within_s: float = 10.0) -> None:
    """The gateway accepts ``token`` (one minted on another gateway's host: shared tokens)."""
    began = time.monotonic()
    while True:
        try:
            async with GatewayClient(url, token):
                return
        except Unauthorized:
            assert time.monotonic() - began < within_s, "the shared token was not accepted"
            await asyncio.sleep(0.2)


async def _approve(client: GatewayClient, iid: str, key: str) -> CommandResult:
    (result,) = await client.command("decide", [iid], decision=APPROVE, key=key)
    return result


async def _ran_once(agent: PolicyAgent, wid: str, args: dict[str, Any]) -> None:
    """The agent's own account: the guarded deploy ran once, on one decision message."""
    entries = await agent.finished(wid)
    assert [(e["tool"], e["type"]) for e in entries if e["kind"] == "outcome"] == [
        ("deploy", "ran")]
    assert [e["args"] for e in agent.side_effects(wid)] == [args]
    record = read_record(agent.db, wid)
    assert len(record.sent) == 1 and record.sent[0]["consumed"], record.sent
    assert record.steps.count("irq.policy:deploy") == 1, record.steps


async def test_two_operators_on_two_gateways_deliver_once_and_one_operator_counts_once(
        governed_pair: tuple[CrashableGateway, CrashableGateway, PolicyAgent]) -> None:
    a, b, agent = governed_pair
    alice = create_token(Role.OPERATOR, "alice", a.home)  # minted on A's host
    bob = create_token(Role.OPERATOR, "bob", b.home)  # minted on B's host
    await _accepted(b.url, alice)
    await _accepted(a.url, bob)
    args = {"service": "billing", "environment": "prod"}
    one, two = agent.run([{"tool": "deploy", "args": args}]), agent.run(
        [{"tool": "deploy", "args": args}])
    async with GatewayClient(a.url, alice) as alice_on_a, GatewayClient(b.url, alice) as \
            alice_on_b, GatewayClient(a.url, bob) as bob_on_a, GatewayClient(b.url, bob) as bob_on_b:
        intr = await pending_interrupt(alice_on_a, one)
        assert intr.policy is not None and intr.policy.rule == RULE
        assert intr.policy.approvers == 2 and intr.args == args
        assert (await pending_interrupt(bob_on_b, one)).id == intr.id
        # alice approves through A; the same approval through B does not count again
        first = await _approve(alice_on_a, intr.id, "alice-on-a")
        assert (first.outcome, first.detail) == ("recorded", f"approval 1 of 2 recorded by "
                                                 f"alice under rule {RULE}; needs another approver")
        again = await _approve(alice_on_b, intr.id, "alice-on-b")
        assert (again.outcome, again.detail) == (
            "forbidden", f"alice already approved; rule {RULE} needs a different approver")
        shown = await interrupt_where(bob_on_b, intr.id,
                                      lambda i: i.policy and i.policy.approvals)
        assert [x["by"] for x in shown.policy.approvals] == ["alice"]  # seen on B too
        assert shown.status == "pending"
        await later_recv_polls(agent.db, one)  # the agent polled again: nothing was sent
        assert agent.side_effects(one) == [] and read_record(agent.db, one).sent == []
        # bob approves through B: the second approver, the decision goes to the agent
        done = await _approve(bob_on_b, intr.id, "bob-on-b")
        assert done.outcome == "applied", done
        decided = await interrupt_where(alice_on_a, intr.id, lambda i: i.status == "decided")
        assert decided.decision is not None and decided.decision.by == "bob"
        assert [x["by"] for x in decided.policy.approvals] == ["alice", "bob"]
        late = await _approve(alice_on_a, intr.id, "alice-late")
        assert late.outcome == "conflict", late

        # the same operator on both gateways at the same moment: one approval counts
        raced = (await pending_interrupt(alice_on_a, two)).id
        await pending_interrupt(alice_on_b, two)
        results = await asyncio.gather(_approve(alice_on_a, raced, "race-on-a"),
                                       _approve(alice_on_b, raced, "race-on-b"))
        assert sorted(r.outcome for r in results) == ["forbidden", "recorded"], results
        assert (await _approve(bob_on_a, raced, "bob-on-a")).outcome == "applied"
        audit = await alice_on_b.query("audit", limit=50)
    await _ran_once(agent, one, args)
    await _ran_once(agent, two, args)
    mine = sorted((e["identity"], e["outcome"]) for e in audit if e["target"] == intr.id)
    assert mine == [("alice", "conflict"), ("alice", "forbidden"), ("alice", "recorded"),
                    ("bob", "applied")], mine  # both gateways' commands, in the shared journal
