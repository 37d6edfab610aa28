"""The records irq writes about a run on a backend, the same on every backend.

Each backend keeps them in its own place (DBOS workflow events and attributes, LangGraph
thread metadata, Restate journal steps; ``<backend>/conventions.py`` says where); their
shape is declared once here. Standard library only: agent processes import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, TypedDict

from backend_adapters.interrupt_deadline import Deadline, deadline_at_iso

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
    #: the agent's own deadline (``deadline=``): created_at + deadline, UTC ISO
    #: (``interrupt_deadline.py``); absent without one
    deadline_at: str


def interrupt_payload(
    interrupt_id: str,
    title: str,
    *,
    description: str,
    action: str,
    args: Mapping[str, Any] | None,
    args_schema: Mapping[str, Any] | None,
    allowed_decisions: Iterable[str],
    created_at: datetime,
    policy: Mapping[str, Any] | None = None,
    deadline: Deadline | None = None,
) -> InterruptPayload:
    """The payload the DBOS, Temporal and Restate helpers publish. ``created_at`` is the
    caller's (each framework has its own deterministic clock); ``policy`` and ``deadline_at``
    (created_at + ``deadline``) only when given."""
    payload: InterruptPayload = {
        "interrupt_id": interrupt_id,
        "title": title,
        "description": description,
        "action": action,
        "args": dict(args or {}),
        "args_schema": dict(args_schema) if args_schema is not None else None,
        "allowed_decisions": list(allowed_decisions),
        "created_at": created_at.isoformat(),
    }
    if policy is not None:
        payload["policy"] = dict(policy)
    deadline_at = deadline_at_iso(created_at, deadline)
    if deadline_at is not None:
        payload["deadline_at"] = deadline_at
    return payload
