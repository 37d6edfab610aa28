"""The records irq writes about a run on a backend, the same on every backend.

Each backend keeps them in its own place (DBOS workflow events and attributes, LangGraph
thread metadata, Restate journal steps; ``<backend>/conventions.py`` says where); their
shape is declared once here. Standard library only: agent processes import it.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

#: where an agent helper says its run is (its heartbeats and reports)
Phase = Literal["running", "waiting", "paused", "cancelled", "completed", "failed"]
IntentAction = Literal["pause", "cancel", "resume", "retry"]


class Intent(TypedDict, total=False):
    """The console's last action on a run, written where the agent helper reads it."""

    action: IntentAction
    by: str
    reason: str
    at: str


class InterruptPayload(TypedDict, total=False):
    """A pending interrupt as an agent helper publishes it."""

    interrupt_id: str
    title: str
    description: str
    action: str
    args: dict[str, Any]
    args_schema: dict[str, Any] | None
    allowed_decisions: list[str]
    created_at: str
    #: the policy rule that requires this approval: {rule, why, decide_role, approvers,
    #: policy_version} (``policy_guard.interrupt_policy``); absent on a plain interrupt
    policy: dict[str, Any] | None
