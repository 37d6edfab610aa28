"""The demo's change approval: a Temporal workflow that waits for a person the way Temporal's
own samples write it (a signal handler sets a field, ``workflow.wait_condition`` waits for it,
with a timeout; no irq imports, no irq heartbeats).

An activity plans a schema migration; the workflow publishes the JSON Schema of its signal's
argument in a plain memo entry (``irq_schemas``, written with the SDK's ``upsert_memo``) and
waits for ``send_approval``. irq finds the wait from Temporal alone (the workflow's
``__temporal_workflow_metadata`` query and its history) and lists it in the inbox (kind
``signal``); an operator's answer is the signal. Approved, the migration runs; rejected or
timed out, it is dropped. The demo worker keeps one running (console/demo/temporal/fleet.py).
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

#: what ``send_approval`` takes (published in the memo, so a console can check an answer)
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "approver": {"type": "string"},
        "comment": {"type": "string"},
    },
    "required": ["approved", "approver"],
    "additionalProperties": False,
}


@activity.defn
async def plan_migration(request: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(float(request.get("plan_s", 1.0)))  # a dry run against a replica
    return {"migration": request["migration"], "tables": request["tables"],
            "lock_s": 40, "rows": 1_200_000}


@activity.defn
async def apply_migration(plan: dict[str, Any]) -> str:
    await asyncio.sleep(float(plan.get("apply_s", 2.0)))
    return f"{plan['migration']} applied to {', '.join(plan['tables'])}"


@workflow.defn(name="change-approval")
class ChangeApproval:
    def __init__(self) -> None:
        self.approval: dict[str, Any] | None = None

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        workflow.upsert_memo({"irq_schemas": {"send_approval": APPROVAL_SCHEMA}})
        plan = await workflow.execute_activity(
            plan_migration, params, start_to_close_timeout=timedelta(seconds=60))
        try:
            await workflow.wait_condition(
                lambda: self.approval is not None,
                timeout=timedelta(seconds=float(params.get("timeout_s", 86400))),
            )
        except TimeoutError:
            return {"plan": plan, "approval": None, "outcome": "timed out: not applied"}
        assert self.approval is not None
        if not self.approval.get("approved"):
            return {"plan": plan, "approval": self.approval, "outcome": "rejected: not applied"}
        outcome = await workflow.execute_activity(
            apply_migration, {**plan, "apply_s": params.get("apply_s", 2.0)},
            start_to_close_timeout=timedelta(seconds=120))
        return {"plan": plan, "approval": self.approval, "outcome": outcome}

    @workflow.signal(description="Approve or reject the planned schema migration")
    def send_approval(self, approval: dict[str, Any]) -> None:
        self.approval = approval

    @workflow.query
    def status(self) -> str:
        if self.approval is None:
            return "waiting for approval"
        return "approved" if self.approval.get("approved") else "rejected"


MIGRATIONS = (("add-index-orders-customer", ["orders"]),
              ("split-events-by-month", ["events", "events_archive"]),
              ("drop-legacy-columns", ["customers"]))


def change_approval_plan(gen: int, rng: random.Random, locks: Path,
                         scale: float) -> dict[str, Any]:
    """The demo fleet's input for generation ``gen`` (the signature of the demo's lanes'
    plans, console/demo/temporal/lanes.py ``Lane``; ``locks`` unused: nothing is held)."""
    migration, tables = MIGRATIONS[(gen - 1) % len(MIGRATIONS)]
    return {"migration": migration, "tables": tables, "plan_s": 2.0 * scale,
            "apply_s": 4.0 * scale, "timeout_s": 86400}
