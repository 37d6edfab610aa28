"""The demo's access request: a Temporal workflow that waits for a person through an update,
the way Temporal's own samples write it (an update handler with a validator sets a field,
``workflow.wait_condition`` waits for it, with a timeout; no irq imports, no irq heartbeats).

A support agent needs temporary read access to a customer's production data to debug a
ticket. An activity gathers what it needs and why; the workflow publishes the JSON Schema of
its update's argument in a plain memo entry (``irq_schemas``, written with the SDK's
``upsert_memo``) and waits for ``approve_access``. The update's validator refuses an approver
who is not on call, and a second decision: the caller gets the refusal, nothing is written to
the workflow's history and it goes on waiting. irq finds the wait from Temporal alone (the
``__temporal_workflow_metadata`` query and the history) and lists it in the inbox (kind
``update``); an operator's answer is the update, and its result is the update's return value.
Granted, the access is opened for the hours asked; denied or timed out, nothing is opened.
The demo worker keeps one running (console/demo/temporal/fleet.py).
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

#: who may grant production data access (the validator refuses anyone else)
ON_CALL = ("alice", "bob")

#: what ``approve_access`` takes (published in the memo, so a console can check an answer)
ACCESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "approver": {"type": "string", "description": "someone on call: " + ", ".join(ON_CALL)},
        "hours": {"type": "integer", "minimum": 1, "maximum": 8},
        "comment": {"type": "string"},
    },
    "required": ["approved", "approver"],
    "additionalProperties": False,
}


@activity.defn
async def scope_access(request: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(float(request.get("scope_s", 1.0)))  # reads the ticket and the schema
    return {"customer": request["customer"], "database": request["database"],
            "tables": request["tables"], "reason": request["reason"], "access": "read-only"}


@activity.defn
async def open_access(grant: dict[str, Any]) -> str:
    await asyncio.sleep(float(grant.get("open_s", 2.0)))
    return (f"read-only access to {grant['database']} ({', '.join(grant['tables'])}) "
            f"for {grant['hours']} h, granted by {grant['approver']}")


@workflow.defn(name="access-request")
class AccessRequest:
    def __init__(self) -> None:
        self.decision: dict[str, Any] | None = None

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        workflow.upsert_memo({"irq_schemas": {"approve_access": ACCESS_SCHEMA}})
        scope = await workflow.execute_activity(
            scope_access, params, start_to_close_timeout=timedelta(seconds=60))
        try:
            await workflow.wait_condition(
                lambda: self.decision is not None,
                timeout=timedelta(seconds=float(params.get("timeout_s", 86400))),
            )
        except TimeoutError:
            return {"scope": scope, "decision": None, "outcome": "expired: no access opened"}
        assert self.decision is not None
        if not self.decision.get("approved"):
            return {"scope": scope, "decision": self.decision, "outcome": "denied"}
        outcome = await workflow.execute_activity(
            open_access,
            {**scope, "hours": self.decision.get("hours", 2),
             "approver": self.decision["approver"], "open_s": params.get("open_s", 2.0)},
            start_to_close_timeout=timedelta(seconds=120))
        return {"scope": scope, "decision": self.decision, "outcome": outcome}

    @workflow.update(description="Grant or deny the support agent temporary read access to "
                     "the customer's production data; only someone on call may decide")
    def approve_access(self, decision: dict[str, Any]) -> str:
        self.decision = decision
        verb = "granted" if decision.get("approved") else "denied"
        return f"{verb} by {decision['approver']}"

    @approve_access.validator
    def validate_approve_access(self, decision: dict[str, Any]) -> None:
        if self.decision is not None:
            raise ValueError("already decided")
        if decision.get("approver") not in ON_CALL:
            raise ValueError(f"{decision.get('approver')!r} is not on call: ask "
                             + " or ".join(ON_CALL))

    @workflow.query
    def status(self) -> str:
        if self.decision is None:
            return "waiting for an on-call approver"
        return "granted" if self.decision.get("approved") else "denied"


REQUESTS = (("globex.example", "billing", ["invoices", "payments"],
             "ticket 4812: charged twice for the March invoice"),
            ("initech.example", "orders", ["orders", "shipments"],
             "ticket 4830: order shows shipped, customer has nothing"),
            ("acme.example", "accounts", ["users", "sso_links"],
             "ticket 4857: SSO login loops back to the sign-in page"))


def access_request_plan(gen: int, rng: random.Random, locks: Path,
                        scale: float) -> dict[str, Any]:
    """The demo fleet's input for generation ``gen`` (the signature of the demo's lanes'
    plans, console/demo/temporal/lanes.py ``Lane``; ``locks`` unused: nothing is held)."""
    customer, database, tables, reason = REQUESTS[(gen - 1) % len(REQUESTS)]
    return {"customer": customer, "database": f"{database}-prod", "tables": tables,
            "reason": reason, "scope_s": 2.0 * scale, "open_s": 3.0 * scale,
            "timeout_s": 86400}
