"""A require_approval rule's deadline and default decision, end to end: real DBOS agents
(tests/support/dbos_policy_agent.py) under a real ``irq serve --policy`` whose policy adds a
rule that rejects by default after one second. The rule decides (identity ``policy:RULE``, its
id in the audit), exactly once across a gateway restart; a rule without a default leaves its
interrupt pending."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.model import Role
from tests.adapters.test_dbos_policy_guard import POLICY_FILE, _pending
from tests.support.crashable_gateway import CrashableGateway
from tests.support.dbos_policy_fleet import PolicyAgent

DEFAULT_RULE = """
[[rules]]
id = "refund-huge"
modality = "require_approval"
action = ["refund"]
condition = "args.amount > 10000"
priority = 1
deadline = "1s"
default_decision = "reject"
default_feedback = "nobody approved a huge refund within 1s"
description = "huge refunds are refused unless a human approves at once"
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CrashableGateway, PolicyAgent]]:
    root = tmp_path_factory.mktemp("dbos-default-decision")
    home = root / "irq"
    home.mkdir()
    policy = home / "policy.toml"
    policy.write_text(POLICY_FILE.read_text() + DEFAULT_RULE)
    agent_root = root / "agent"
    gateway = CrashableGateway(home, f"dbos+sqlite:///{agent_root / 'sys.db'}?poll=0.3",
                               policy=policy)
    token = create_token(Role.AGENT, "policy-agent", home, scopes=["dbos:local"])
    agent = PolicyAgent(agent_root, {"IRQ_AGENT_URL": f"{gateway.url}/agent",
                                     "IRQ_AGENT_TOKEN": token, "IRQ_AGENT_CONTEXT": "local"})
    try:
        gateway.start()
        agent.start()
        yield gateway, agent
    finally:
        agent.stop()
        gateway.stop()


def _by_rule(audit: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    return [e for e in audit if e["target"] == target and e["identity"] == "policy:refund-huge"]


async def test_past_the_deadline_the_rule_rejects_once_and_a_rule_without_default_waits(
    setup: tuple[CrashableGateway, PolicyAgent],
) -> None:
    gateway, agent = setup
    waits = agent.run([{"tool": "refund", "args": {"amount": 250}}])  # refund-large: no default
    huge = agent.run([{"tool": "refund", "args": {"amount": 50_000}}])
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        pending = await _pending(client, waits)
        raised = await _pending(client, huge)
        assert raised.policy is not None and raised.policy.rule == "refund-huge"
        assert raised.policy.default_decision == "reject" and raised.policy.deadline_s == 1.0
        assert raised.deadline_at is not None
        entries = await agent.finished(huge, timeout_s=30)
        (outcome,) = [e for e in entries if e["kind"] == "outcome"]
        assert outcome["type"] == "rejected"
        assert outcome["feedback"] == "nobody approved a huge refund within 1s"
        assert agent.side_effects(huge) == []
        deadline = time.monotonic() + 10
        while (decided := client.view.interrupts.get(raised.id)) is None or (
                decided.status != "decided"):
            assert time.monotonic() < deadline, decided
            try:
                await asyncio.wait_for(client.updates(), 1.0)
            except TimeoutError:
                pass
        assert decided.decision is not None and decided.decision.by == "policy:refund-huge"
        audit = await client.query("audit", limit=200)
        (entry,) = _by_rule(audit, raised.id)
        assert entry["action"] == "reject" and entry["outcome"] == "applied"
        assert "policy rule refund-huge" in entry["reason"]
        # the refund-large interrupt (raised before, deadline-free) is still waiting
        still = client.view.interrupts[pending.id]
        assert still.status == "pending" and still.decision is None
    # a restart re-reads the journal: the rule's decision is not taken a second time
    assert gateway.process is not None
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(10)
    gateway.start()
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        await _pending(client, waits)  # the gateway has read the backend again
        audit = await client.query("audit", limit=200)
        assert len(_by_rule(audit, raised.id)) == 1
        assert client.view.interrupts[pending.id].status == "pending"
