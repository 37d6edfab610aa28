"""The policy guard end to end: real DBOS agents (SQLite) whose tool calls go through
``AgentRun.tool`` (tests/support/dbos_policy_agent.py), a real ``irq serve --policy`` with
tests/support/dbos_policy.toml, and a console client.

Whether a tool really ran is read from the agent's own record (a line its body writes), not
from what the console was told.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.client import GatewayClient
from console.gateway.auth import create_token
from console.model import Decision, DecisionKind, Role
from devtools.dbos_record import read_record
from tests.support.crashable_gateway import ROOT, CrashableGateway
from tests.support.dbos_policy_fleet import PolicyAgent

POLICY_FILE = ROOT / "tests" / "support" / "dbos_policy.toml"


def policy_gateway(home: Path, backend: str) -> CrashableGateway:
    """``irq serve --policy FILE`` on a copy of tests/support/dbos_policy.toml (restartable)."""
    policy = home / "policy.toml"
    policy.write_text(POLICY_FILE.read_text())
    return CrashableGateway(home, backend, policy=policy)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CrashableGateway, PolicyAgent]]:
    root = tmp_path_factory.mktemp("dbos-policy")
    home = root / "irq"
    home.mkdir()
    agent_root = root / "agent"
    gateway = policy_gateway(home, f"dbos+sqlite:///{agent_root / 'sys.db'}?poll=0.3")
    token = create_token(Role.AGENT, "policy-agent", home, scopes=["dbos:local"])
    agent = PolicyAgent(
        agent_root,
        {
            "IRQ_AGENT_URL": f"{gateway.url}/agent",
            "IRQ_AGENT_TOKEN": token,
            "IRQ_AGENT_CONTEXT": "local",
        },
    )
    try:
        gateway.start()
        agent.start()
        yield gateway, agent
    finally:
        agent.stop()
        gateway.stop()


async def _run_detail(client: GatewayClient, wid: str, timeout_s: float = 20) -> dict[str, Any]:
    """The run detail once the gateway lists the run and holds at least one decision."""
    deadline = time.monotonic() + timeout_s
    while True:
        if f"dbos:local/{wid}" in client.view.runs:
            detail = await client.query("run", run_id=f"dbos:local/{wid}")
            if detail["policy_decisions"]:
                return dict(detail)
        assert time.monotonic() < deadline, f"no policy decisions for {wid}"
        await asyncio.sleep(0.2)


async def _pending(client: GatewayClient, wid: str, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for intr in client.view.pending_interrupts():
            if intr.run_id == f"dbos:local/{wid}":
                return intr
        try:
            await asyncio.wait_for(client.updates(), 1.0)
        except TimeoutError:
            pass
    raise AssertionError(f"no pending interrupt for {wid}")


async def test_a_prohibited_call_never_runs_and_the_console_sees_the_decision(
    setup: tuple[CrashableGateway, PolicyAgent],
) -> None:
    gateway, agent = setup
    wid = agent.run([{"tool": "wipe_ledger", "args": {"table": "ledger"}}, {"tool": "refund",
                     "args": {"amount": 5}}])  # fmt: skip
    entries = await agent.finished(wid)
    outcomes = [e for e in entries if e["kind"] == "outcome"]
    assert [(o["tool"], o["type"]) for o in outcomes] == [
        ("wipe_ledger", "prohibited"),
        ("refund", "ran"),
    ]
    assert outcomes[0]["winner"] == "no-wipe"
    assert [e["tool"] for e in agent.side_effects(wid)] == ["refund"]  # the wipe never ran
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        detail = await _run_detail(client, wid)
    decisions = {d["tool"]: d for d in detail["policy_decisions"]}
    assert decisions["wipe_ledger"]["outcome"] == "prohibit"
    assert decisions["wipe_ledger"]["winner"] == "no-wipe"
    assert decisions["refund"]["outcome"] == "permit"


async def test_an_approval_item_runs_the_call_once_after_approve_never_after_reject(
    setup: tuple[CrashableGateway, PolicyAgent],
) -> None:
    gateway, agent = setup
    approved = agent.run([{"tool": "refund", "args": {"amount": 250}}])
    rejected = agent.run([{"tool": "refund", "args": {"amount": 900}}])
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        first = await _pending(client, approved)
        second = await _pending(client, rejected)
        assert first.policy is not None and first.policy.rule == "refund-large"
        assert first.policy.why == "refunds over 100 EUR need a human"
        assert first.title == "refund: approval required by refund-large"
        assert first.action == "refund" and first.args == {"amount": 250}
        assert agent.side_effects(approved) == []  # nothing runs before the decision
        edit = Decision(kind=DecisionKind.EDIT, args={"amount": 240})
        (done,) = await client.command("decide", [first.id], decision=edit)
        assert done.outcome == "applied", done
        no = Decision(kind=DecisionKind.REJECT, feedback="not for this customer")
        (refused,) = await client.command("decide", [second.id], decision=no)
        assert refused.outcome == "applied", refused
    await agent.finished(approved)
    entries = await agent.finished(rejected)
    assert [e["args"] for e in agent.side_effects(approved)] == [{"amount": 240}]
    assert agent.side_effects(rejected) == []
    (outcome,) = [e for e in entries if e["kind"] == "outcome"]
    assert outcome["type"] == "rejected" and outcome["feedback"] == "not for this customer"


async def test_obligations_fulfilled_overdue_and_waived_survive_a_gateway_restart(
    setup: tuple[CrashableGateway, PolicyAgent],
) -> None:
    """...and the ones a run incurs while the gateway is down arrive once it is back."""
    gateway, agent = setup
    read = {"tool": "read_records", "args": {"patient": "p-1"}, "data": ["patients"]}
    research = agent.run([read], team="research", fulfil=["notify-ciso"])
    compliance = agent.run([read], team="compliance")
    for wid in (research, compliance):
        await agent.finished(wid)
    prefix = {wid: f"dbos:local/{wid}#" for wid in (research, compliance)}

    async def states(client: GatewayClient) -> dict[tuple[str, str], dict[str, Any]]:
        listed = await client.query("obligations")
        return {
            (wid, ob["rule"]): ob
            for ob in listed
            for wid in prefix
            if ob["id"].startswith(prefix[wid])
        }

    want = {
        (research, "notify-ciso"): "fulfilled",
        (research, "log-access"): "overdue",  # within_s = 1 and nobody fulfils it
        (compliance, "notify-ciso"): "waived",
        (compliance, "log-access"): "overdue",
    }
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        deadline = time.monotonic() + 20
        while {k: v["state"] for k, v in (await states(client)).items()} != want:
            assert time.monotonic() < deadline, await states(client)
            await asyncio.sleep(0.3)
    assert gateway.process is not None
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(10)
    # while the gateway is down: the agent queues the decision and obligations of this run
    late = agent.run([read], team="research", fulfil=["notify-ciso"])
    await agent.finished(late)
    prefix[late] = f"dbos:local/{late}#"
    gateway.start()
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        after = await states(client)
        assert {k: v["state"] for k, v in after.items() if k[0] != late} == want
        want |= {(late, "notify-ciso"): "fulfilled", (late, "log-access"): "overdue"}
        deadline = time.monotonic() + 20
        while {k: v["state"] for k, v in after.items()} != want:
            assert time.monotonic() < deadline, after
            await asyncio.sleep(0.3)
            after = await states(client)
    assert after[(compliance, "notify-ciso")]["by"] == "compliance-exempt"
    assert after[(research, "notify-ciso")]["note"] == "notify the CISO: done by the agent"
    assert after[(research, "notify-ciso")]["by"] == "policy-agent"  # the agent token


async def test_without_a_policy_a_sensitive_call_is_refused_and_a_plain_call_runs(
    tmp_path: Path,
) -> None:
    agent = PolicyAgent(tmp_path / "no-policy", {})  # no gateway: no policy ever arrives
    agent.start()
    try:
        wid = agent.run([
            {"tool": "pay", "args": {"amount": 1}, "sensitive": True},
            {"tool": "lookup", "args": {"q": "x"}},
        ])  # fmt: skip
        entries = await agent.finished(wid)
    finally:
        agent.stop()
    outcomes = [e for e in entries if e["kind"] == "outcome"]
    assert [(o["tool"], o["type"]) for o in outcomes] == [("pay", "prohibited"), ("lookup", "ran")]
    assert outcomes[0]["winner"] is None
    assert outcomes[0]["explanation"][0] == "no policy received: sensitive tool fails closed"
    assert [e["tool"] for e in agent.side_effects(wid)] == ["lookup"]


async def _policy_version(client: GatewayClient, old: str | None, timeout_s: float = 20) -> str:
    """The gateway's policy version once it differs from ``old``."""
    deadline = time.monotonic() + timeout_s
    while True:
        version = str((await client.query("policy"))["version"])
        if version != old:
            return version
        assert time.monotonic() < deadline, f"the gateway did not reload (still {old})"
        await asyncio.sleep(0.3)


FREEZE = """
[[rules]]
id = "refund-freeze"
modality = "prohibit"
action = ["refund"]
priority = 10
description = "refunds are frozen"
"""


async def test_a_recovered_run_reuses_its_journaled_decision_after_the_policy_changed(
    setup: tuple[CrashableGateway, PolicyAgent],
) -> None:
    gateway, agent = setup
    original = gateway.policy.read_text()
    wid = agent.run([{"tool": "refund", "args": {"amount": 250}}])
    async with GatewayClient(gateway.url, gateway.tokens["operator"]) as client:
        before = (await _pending(client, wid)).id
        version = await _policy_version(client, None)
        agent.kill()  # while the run waits for the approval
        gateway.policy.write_text(original + FREEZE)  # refunds are now prohibited
        frozen = await _policy_version(client, version)
        agent.start()  # recovers the run: the decision step replays, nothing re-evaluated
        try:
            fresh = agent.run([{"tool": "refund", "args": {"amount": 250}}])
            outcome = [e for e in await agent.finished(fresh) if e["kind"] == "outcome"]
            assert outcome[0]["type"] == "prohibited" and outcome[0]["winner"] == "refund-freeze"
            again = await _pending(client, wid)
            assert again.id == before and again.policy is not None
            assert again.policy.rule == "refund-large"
            assert again.policy.policy_version == version != frozen
            (done,) = await client.command(
                "decide", [again.id], decision=Decision(kind=DecisionKind.APPROVE)
            )
            assert done.outcome == "applied", done
            await agent.finished(wid)
        finally:
            gateway.policy.write_text(original)
            await _policy_version(client, frozen)
    assert [e["args"] for e in agent.side_effects(wid)] == [{"amount": 250}]
    steps = read_record(agent.db, wid).steps
    assert steps.count("irq.policy:refund") == 1, steps
