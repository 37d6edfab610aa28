"""Command rules at the gateway (``on = "command"`` in the policy file given to the gateway),
against a real DBOS agent on SQLite: the policy decides which operator commands go through,
and every refusal names its rule and is audited."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_fleet import GovernedFleet, make_fleet, pending_interrupt

from console.client import GatewayClient
from console.model import Decision, DecisionKind
from devtools.dbos_record import read_record, settled_record

POLICY = """
default = "permit"

[[rules]]
id = "cancel-prod-lock-needs-reason"
on = "command"
modality = "prohibit"
action = ["cancel"]
condition = 'cmd.reason == "" && resources.exists(r, r.kind == "lock" && r.id.startsWith("prod"))'
description = "a run holding a prod lock is cancelled only with a reason"

[[rules]]
id = "pause-prod-lock-admin"
on = "command"
modality = "require_approval"
action = ["pause"]
object = ["lock"]
condition = 'resources.exists(r, r.id.startsWith("prod"))'
decide_role = "admin"
description = "pausing a run holding a prod lock is for admins"

[[rules]]
id = "drop-table-admin"
modality = "require_approval"
action = ["drop_table"]
decide_role = "admin"
description = "dropping a table needs an admin"

[[rules]]
id = "users-table-stays"
modality = "prohibit"
action = ["drop_table"]
condition = 'args.table == "users"'
description = "the users table is never dropped"
"""
LOCKED = "locked-job"
DROP = "drop-orders"
SPECS = [
    {"id": LOCKED, "steps": 300,
     "resources": [{"id": "prod-db-lock", "kind": "lock", "on_pause": "release"}]},
    # the agent's payload says operator; the gateway's policy holds the same rule: admin
    {"id": DROP, "steps": 1, "interrupt": {
        "title": "drop_table: approval required by drop-table-admin", "action": "drop_table",
        "args": {"table": "orders"}, "allowed": ["approve", "edit", "reject"],
        "policy": {"rule": "drop-table-admin", "why": "dropping a table needs an admin",
                   "decide_role": "operator", "approvers": 1}}},
]


@pytest.fixture
async def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GovernedFleet]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    fleet = make_fleet(tmp_path, SPECS, policy=policy)
    fleet.start_agent()
    try:
        await fleet.start_gateway()
        yield fleet
    finally:
        await fleet.stop_gateway()
        fleet.stop()


async def _locked_run(client: GatewayClient, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run in client.view.runs.values():
            if run.native_id == LOCKED and any(r.id == "prod-db-lock" for r in run.resources):
                return run.id
        await client.updates()
    raise AssertionError("the locked run never showed its lock")


async def test_cancel_of_a_run_holding_a_prod_lock_needs_a_reason(fleet: GovernedFleet):
    async with fleet.client("alice") as alice, fleet.client("root") as root:
        run_id = await _locked_run(alice)
        refused = (await alice.command("cancel", [run_id]))[0]
        assert refused.outcome == "forbidden" and refused.error == "forbidden", refused
        assert refused.detail == (
            "forbidden by policy rule cancel-prod-lock-needs-reason: "
            "a run holding a prod lock is cancelled only with a reason")
        # require_approval on a command: the operator is not enough, an admin is
        paused = (await alice.command("pause", [run_id], dry_run=True))[0]
        assert paused.outcome == "forbidden", paused
        assert "pause-prod-lock-admin" in paused.detail and "role admin" in paused.detail
        assert (await root.command("pause", [run_id], dry_run=True))[0].outcome == "planned"
        assert read_record(fleet.db, LOCKED).status == "PENDING"
        done = (await alice.command("cancel", [run_id], reason="stuck on a dead replica"))[0]
        assert done.outcome == "applied", done
        audit = await alice.query("audit", limit=50)
    record = await settled_record(fleet.db, LOCKED)
    assert record.status == "CANCELLED", record
    mine = [(a["action"], a["outcome"], a["detail"]) for a in audit
            if a["target"] == run_id and a["identity"] == "alice"]
    assert ("cancel", "forbidden", refused.detail) in mine
    assert any(action == "cancel" and outcome == "applied" for action, outcome, _ in mine)


async def test_approving_a_drop_table_needs_an_admin(fleet: GovernedFleet):
    async with fleet.client("alice") as alice, fleet.client("root") as root:
        intr = await pending_interrupt(alice, DROP)
        # shown as the gateway applies it: the stricter rule of the loaded policy
        assert intr.policy is not None and intr.policy.decide_role == "admin"
        approve = Decision(kind=DecisionKind.APPROVE)
        refused = (await alice.command("decide", [intr.id], decision=approve))[0]
        assert refused.outcome == "forbidden" and refused.error == "forbidden", refused
        assert refused.detail.startswith("forbidden by policy rule drop-table-admin")
        assert "needs role admin; alice has role operator" in refused.detail
        assert read_record(fleet.db, DROP).sent == []
        done = (await root.command("decide", [intr.id], decision=approve))[0]
        assert done.outcome == "applied", done
        audit = await root.query("audit", limit=50)
    record = await settled_record(fleet.db, DROP)
    assert len(record.sent) == 1 and record.status == "SUCCESS", record
    assert [d["type"] for d in fleet.decisions(DROP)] == ["approve"]
    assert any(a["identity"] == "alice" and a["outcome"] == "forbidden"
               and "drop-table-admin" in a["detail"] for a in audit)


async def test_an_edit_is_a_new_proposal_checked_against_the_policy_before_it_runs(
        fleet: GovernedFleet):
    """An approver may not edit an approvable call into one the policy prohibits: the edited
    call is checked as the agent's guard would check it, and nothing reaches the agent."""
    async with fleet.client("root") as root:
        intr = await pending_interrupt(root, DROP)
        into_users = Decision(kind=DecisionKind.EDIT, args={"table": "users"})
        refused = (await root.command("decide", [intr.id], decision=into_users))[0]
        assert refused.outcome == "forbidden" and refused.error == "forbidden", refused
        assert "prohibited by policy rule users-table-stays" in refused.detail, refused.detail
        assert read_record(fleet.db, DROP).sent == []
        assert root.view.interrupts[intr.id].status == "pending"
        edit = Decision(kind=DecisionKind.EDIT, args={"table": "orders_2019"})
        done = (await root.command("decide", [intr.id], decision=edit))[0]
        assert done.outcome == "applied", done
    record = await settled_record(fleet.db, DROP)
    assert len(record.sent) == 1 and record.status == "SUCCESS", record
    received = fleet.decisions(DROP)
    assert [(d["type"], d["args"]) for d in received] == [("edit", {"table": "orders_2019"})]
