"""A DBOS agent that waits for a person the way DBOS's own examples do: a step proposes,
the workflow blocks in ``DBOS.recv("approval", timeout_seconds=3600)`` and acts on the
message. It imports nothing from irq.

``python tests/adapters/plain_recv_agent.py SQLITE_PATH [--published ID ...] [ID ...]``
starts one ``approval_workflow`` per ID (``published_workflow`` for the ones after
``--published``: it names its topic and the message's JSON Schema in events first), prints
``ready`` and runs until killed. More workflows can be enqueued on the queue ``approvals``
(``approval_workflow``, argument: the order).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from dbos import DBOS, SetWorkflowID

#: what the published workflow expects (set as its recv_schema event)
DECISION_SCHEMA = {
    "type": "object",
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
}


@DBOS.step()
def propose(order: str) -> dict[str, Any]:
    return {"order": order, "amount": 250}


@DBOS.step()
def act(proposal: dict[str, Any], decision: Any) -> str:
    if decision is None:
        return "timed out"
    approved = isinstance(decision, dict) and (
        decision.get("approved") is True or decision.get("type") == "approve"
    )
    return f"refunded {proposal['amount']}" if approved else "not refunded"


@DBOS.workflow()
def approval_workflow(order: str) -> dict[str, Any]:
    proposal = propose(order)
    decision = DBOS.recv("approval", timeout_seconds=3600)
    return {"proposal": proposal, "decision": decision, "outcome": act(proposal, decision)}


@DBOS.workflow()
def published_workflow(order: str) -> dict[str, Any]:
    proposal = propose(order)
    DBOS.set_event("recv_topic", "approval")
    DBOS.set_event("recv_schema", DECISION_SCHEMA)
    decision = DBOS.recv("approval", timeout_seconds=3600)
    return {"proposal": proposal, "decision": decision, "outcome": act(proposal, decision)}


def main(db_path: str, args: list[str]) -> None:
    DBOS(
        config={
            "name": "refund-approvals",
            "system_database_url": f"sqlite:///{db_path}",
            "application_version": "refunds-1",
        }
    )
    DBOS.launch()
    DBOS.register_queue("approvals", polling_interval_sec=0.1)  # after launch (DBOS 3.4)
    published = False
    for arg in args:
        if arg == "--published":
            published = True
            continue
        with SetWorkflowID(arg):
            DBOS.start_workflow(published_workflow if published else approval_workflow, arg)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
