"""Four eyes at the gateway, against a real DBOS agent on SQLite: an interrupt raised under a
rule with ``approvers = 2`` reaches the agent only when two different people approved it.

What the agent received is read from its own record (its events file and its DBOS system
database, where the gateway is the only sender), not from the gateway's answers.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_fleet import (
    GovernedFleet,
    interrupt_where,
    later_recv_polls,
    make_fleet,
    pending_interrupt,
)

from console.model import Decision, DecisionKind
from devtools.dbos_record import read_record, settled_record

RULE = "prod-deploy-four-eyes"
POLICY = {"rule": RULE, "why": "a prod deploy needs two different approvers",
          "decide_role": "operator", "approvers": 2, "policy_version": "sha256:test"}
SPECS = [
    {"id": "deploy-4e", "steps": 1, "interrupt": {
        "title": "deploy: approval required by prod-deploy-four-eyes", "action": "deploy",
        "args": {"service": "billing", "environment": "prod"},
        "allowed": ["approve", "edit", "reject"], "policy": POLICY}},
    {"id": "deploy-4e-reject", "steps": 1, "interrupt": {
        "title": "deploy: approval required by prod-deploy-four-eyes", "action": "deploy",
        "args": {"service": "ledger", "environment": "prod"},
        "allowed": ["approve", "edit", "reject"], "policy": POLICY}},
]
APPROVE = Decision(kind=DecisionKind.APPROVE)


@pytest.fixture
async def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GovernedFleet]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    fleet = make_fleet(tmp_path, SPECS)
    fleet.start_agent()
    try:
        await fleet.start_gateway()
        yield fleet
    finally:
        await fleet.stop_gateway()
        fleet.stop()


async def test_two_distinct_approvers_deliver_once_and_survive_a_restart(fleet: GovernedFleet):
    wid = "deploy-4e"
    async with fleet.client("alice") as alice:
        intr = await pending_interrupt(alice, wid)
        assert intr.policy is not None and intr.policy.rule == RULE and intr.policy.approvers == 2
        first = (await alice.command("decide", [intr.id], decision=APPROVE, key="alice-1"))[0]
        assert first.outcome == "recorded", first
        assert first.detail == (f"approval 1 of 2 recorded by alice under rule {RULE}; "
                                "needs another approver")
        # everyone sees who approved
        shown = await interrupt_where(alice, intr.id,
                                      lambda i: i.policy and i.policy.approvals)
        assert [a["by"] for a in shown.policy.approvals] == ["alice"]
        assert shown.status == "pending"
        # the same person again, under another key: refused
        again = (await alice.command("decide", [intr.id], decision=APPROVE, key="alice-2"))[0]
        assert again.outcome == "forbidden" and again.error == "forbidden"
        assert again.detail == f"alice already approved; rule {RULE} needs a different approver"
        # the same key: the recorded result, replayed
        replay = (await alice.command("decide", [intr.id], decision=APPROVE, key="alice-1"))[0]
        assert replay.outcome == "recorded" and replay.replayed
    await later_recv_polls(fleet.db, wid)  # the agent polled again: nothing was sent to it
    record = read_record(fleet.db, wid)
    assert record.sent == [] and record.status == "PENDING", record
    assert fleet.decisions(wid) == []

    await fleet.stop_gateway()
    await fleet.start_gateway()  # the approval is in the journal
    async with fleet.client("alice") as alice, fleet.client("bob") as bob, \
            fleet.client("carol") as carol:
        intr = await pending_interrupt(bob, wid)
        shown = await interrupt_where(bob, intr.id, lambda i: i.policy and i.policy.approvals)
        assert [a["by"] for a in shown.policy.approvals] == ["alice"]
        after = (await alice.command("decide", [intr.id], decision=APPROVE))[0]
        assert after.outcome == "forbidden" and "alice already approved" in after.detail
        second = (await bob.command("decide", [intr.id], decision=APPROVE, key="bob-1"))[0]
        assert second.outcome == "applied", second
        third = (await carol.command("decide", [intr.id], decision=APPROVE))[0]
        assert third.outcome == "conflict", third
        decided = await interrupt_where(carol, intr.id, lambda i: i.status == "decided")
        assert decided.decision is not None and decided.decision.by == "bob"
        assert [a["by"] for a in decided.policy.approvals] == ["alice", "bob"]
        audit = await alice.query("audit", limit=50)
    record = await settled_record(fleet.db, wid)
    assert record.status == "SUCCESS", record
    assert len(record.sent) == 1 and record.sent[0]["consumed"], record.sent
    assert [d["type"] for d in fleet.decisions(wid)] == ["approve"]
    mine = [(a["identity"], a["outcome"]) for a in audit if a["target"] == intr.id]
    assert ("alice", "recorded") in mine and ("alice", "forbidden") in mine
    assert ("bob", "applied") in mine and ("carol", "conflict") in mine


async def test_a_reject_by_one_person_is_delivered_at_once(fleet: GovernedFleet):
    wid = "deploy-4e-reject"
    async with fleet.client("carol") as carol:
        intr = await pending_interrupt(carol, wid)
        no = Decision(kind=DecisionKind.REJECT, feedback="not during the freeze")
        result = (await carol.command("decide", [intr.id], decision=no))[0]
        assert result.outcome == "applied", result
    record = await settled_record(fleet.db, wid)
    assert len(record.sent) == 1, record.sent
    assert [(d["type"], d["feedback"]) for d in fleet.decisions(wid)] == [
        ("reject", "not during the freeze")]


async def test_a_viewer_cannot_approve_and_approvals_must_agree(fleet: GovernedFleet):
    wid = "deploy-4e-reject"
    async with fleet.client("watcher") as watcher, fleet.client("alice") as alice, \
            fleet.client("bob") as bob:
        intr = await pending_interrupt(alice, wid)
        viewer = (await watcher.command("decide", [intr.id], decision=APPROVE))[0]
        assert viewer.outcome == "forbidden"
        edit = Decision(kind=DecisionKind.EDIT, args={"service": "ledger", "environment": "dev"})
        first = (await alice.command("decide", [intr.id], decision=edit))[0]
        assert first.outcome == "recorded", first
        # bob approves the proposed (prod) arguments, alice approved dev: not the same approval
        other = (await bob.command("decide", [intr.id], decision=APPROVE))[0]
        assert other.outcome == "conflict" and "alice approved other arguments" in other.detail
        same = (await bob.command("decide", [intr.id], decision=edit))[0]
        assert same.outcome == "applied", same
    await settled_record(fleet.db, wid)
    assert [(d["type"], d["args"]) for d in fleet.decisions(wid)] == [
        ("edit", {"service": "ledger", "environment": "dev"})]


async def test_the_cli_prints_a_recorded_approval_and_exits_0(fleet: GovernedFleet):
    from tests.cli.cli_harness import irq_process

    wid = "deploy-4e"
    async with fleet.client("alice") as alice:
        intr = await pending_interrupt(alice, wid)

    def approve(person: str) -> subprocess.CompletedProcess[str]:
        return irq_process("approve", intr.id, "--yes",
                           env={"IRQ_URL": fleet.url, "IRQ_TOKEN": fleet.tokens[person]})

    first = await asyncio.to_thread(approve, "alice")
    assert first.returncode == 0, first.stderr
    assert (f"approval 1 of 2 recorded by alice under rule {RULE}; needs another approver"
            in " ".join(first.stdout.split()))
    again = await asyncio.to_thread(approve, "alice")
    assert again.returncode == 5, again  # forbidden
    assert "alice already approved" in " ".join((again.stdout + again.stderr).split())
    second = await asyncio.to_thread(approve, "bob")
    assert second.returncode == 0 and "applied" in second.stdout, second
    await settled_record(fleet.db, wid)
    assert [d["type"] for d in fleet.decisions(wid)] == ["approve"]
