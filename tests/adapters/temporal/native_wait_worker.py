"""Human-in-the-loop workflows written the way Temporal's own samples write them: no irq code.

``python tests/adapters/temporal/native_wait_worker.py ADDRESS TASK_QUEUE`` prints ``ready``
once it polls, and runs until killed. It imports nothing from irq: irq has to find these
waits from Temporal alone (history, ``__temporal_workflow_metadata``, the memo).

- ``SignalApproval``: an activity proposes a change, then the workflow waits in
  ``workflow.wait_condition`` (timeout ``params["timeout_s"]``, default 24 h) until the
  ``send_approval`` signal arrives; it returns the proposal and the approval it got.
- ``UpdateApproval``: the same with an ``approve`` update whose validator refuses an
  approver who is not on the list and a missing ``approved`` flag.

Both publish a JSON Schema for their handler's argument in the memo key ``irq_schemas``
(``{handler_name: schema}``) when ``params["publish_schema"]`` is true: a plain memo entry,
written with the SDK's own ``workflow.upsert_memo``.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "approver": {"type": "string"},
        "comment": {"type": "string"},
    },
    "required": ["approved", "approver"],
    "additionalProperties": False,
}
APPROVERS = ("alice", "bob")


@activity.defn
async def propose_change(request: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(float(request.get("propose_s", 0.0)))
    return {"change": request.get("change", "deploy model v2"), "risk": "low"}


@workflow.defn
class SignalApproval:
    def __init__(self) -> None:
        self.approval: dict[str, Any] | None = None

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("publish_schema"):
            workflow.upsert_memo({"irq_schemas": {"send_approval": APPROVAL_SCHEMA}})
        proposal = await workflow.execute_activity(
            propose_change, params, start_to_close_timeout=timedelta(seconds=30)
        )
        try:
            await workflow.wait_condition(
                lambda: self.approval is not None,
                timeout=timedelta(seconds=float(params.get("timeout_s", 86400))),
            )
        except TimeoutError:  # asyncio.TimeoutError in Temporal's samples (the same class)
            return {"proposal": proposal, "approval": None, "timed_out": True}
        return {"proposal": proposal, "approval": self.approval}

    @workflow.signal(description="Approve or reject the proposed change")
    def send_approval(self, approval: dict[str, Any]) -> None:
        self.approval = approval

    @workflow.query
    def proposal_status(self) -> str:
        return "approved" if self.approval else "waiting"


@workflow.defn
class UpdateApproval:
    def __init__(self) -> None:
        self.approval: dict[str, Any] | None = None

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("publish_schema"):
            workflow.upsert_memo({"irq_schemas": {"approve": APPROVAL_SCHEMA}})
        proposal = await workflow.execute_activity(
            propose_change, params, start_to_close_timeout=timedelta(seconds=30)
        )
        await workflow.wait_condition(
            lambda: self.approval is not None,
            timeout=timedelta(seconds=float(params.get("timeout_s", 86400))),
        )
        return {"proposal": proposal, "approval": self.approval}

    @workflow.update(description="Approve the proposed change; returns who approved it")
    def approve(self, approval: dict[str, Any]) -> str:
        self.approval = approval
        return f"approved by {approval['approver']}"

    @approve.validator
    def validate_approve(self, approval: dict[str, Any]) -> None:
        if self.approval is not None:
            raise ValueError("already decided")
        if approval.get("approver") not in APPROVERS:
            raise ValueError(f"{approval.get('approver')!r} may not approve this change")


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address, identity=f"native-wait-worker-{task_queue}")
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[SignalApproval, UpdateApproval],
        activities=[propose_change],
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
