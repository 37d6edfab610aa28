"""irq's Temporal conventions: the names and payload shapes shared by agents and the console.

Temporal has no notion of "a run waiting for a human" nor of "resources an activity holds".
irq establishes them (documented in ``README.md`` next to this file):

- workflow code raises interrupts through :class:`backend_adapters.temporal.agent.Interrupts`,
  which keeps the search attribute :data:`SEARCH_ATTRIBUTE` (KeywordList of pending interrupt
  ids) and the memo key :data:`MEMO_KEY` (the pending interrupts in the common shape) up to
  date, answers the query :data:`QUERY_NAME` and accepts decisions through the update
  :data:`UPDATE_NAME`;
- activities heartbeat a :data:`HEARTBEAT_MARKER`-tagged dict with progress, the resource
  manifest and the agent's own cadence (see :func:`heartbeat_details`).

This module imports nothing from temporalio: the console side uses it without the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

#: KeywordList search attribute: ids of the interrupts pending on a workflow (unset when none).
SEARCH_ATTRIBUTE: Final = "IrqPendingInterrupts"
#: how to register it on a server (the dev server takes ``--search-attribute``)
SEARCH_ATTRIBUTE_TYPE: Final = "KeywordList"
#: memo key holding the pending interrupts in the common shape (so one list call shows them)
MEMO_KEY: Final = "irq_interrupts"
#: memo key holding the last activity outcome report (set by ``agent.run_activity``)
REPORT_MEMO_KEY: Final = "irq_report"
#: memo key where a workflow that waits in its own code (no irq helper) publishes a JSON Schema
#: for each signal / update argument: ``{handler name: schema}``; irq validates payloads with it
SCHEMAS_MEMO_KEY: Final = "irq_schemas"
#: workflow query returning the pending interrupts, a list in the common shape
QUERY_NAME: Final = "irq_pending_interrupts"
#: workflow update delivering a decision; ``updateId`` = the command's idempotency key
UPDATE_NAME: Final = "irq_decide"

#: failure types raised by the update validator / handler
ERROR_NOT_PENDING: Final = "IrqInterruptNotPending"
ERROR_INVALID_DECISION: Final = "IrqInvalidDecision"
#: failure type of an activity that released its resources after a cancel request (the
#: details carry the final heartbeat details, so the release report reaches history)
ERROR_ACTIVITY_CANCELLED: Final = "IrqActivityCancelled"

#: key marking heartbeat details written by irq's activity helper (value = format version)
HEARTBEAT_MARKER: Final = "irq"
HEARTBEAT_VERSION: Final = 1

#: keys of one pending interrupt (the common shape shared with the other backends)
INTERRUPT_FIELDS: Final = (
    "interrupt_id",
    "title",
    "description",
    "action",
    "args",
    "args_schema",
    "allowed_decisions",
    "created_at",
)

DECISION_KINDS: Final = ("approve", "edit", "reject", "respond")


def pending_interrupts_query(extra: str = "") -> str:
    """Visibility query for running workflows with a pending interrupt."""
    query = f"{SEARCH_ATTRIBUTE} IS NOT NULL AND ExecutionStatus = 'Running'"
    return f"{query} AND ({extra})" if extra else query


def update_input(
    interrupt_id: str, decision: dict[str, Any], *, by: str, idempotency_key: str
) -> dict[str, Any]:
    """The single argument of the :data:`UPDATE_NAME` update."""
    return {
        "interrupt_id": interrupt_id,
        "decision": decision,
        "by": by,
        "idempotency_key": idempotency_key,
    }


def heartbeat_details(
    *,
    progress: dict[str, Any],
    resources: Sequence[Mapping[str, Any]],
    cadence_s: float | None,
    seq: int,
    report: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one heartbeat-details value irq's activity helper sends.

    ``progress`` may hold ``fraction`` (0..1) or ``step`` and ``total``; ``resources`` are
    ``{id, kind, on_pause, on_cancel, state}``; ``report`` says what the agent did on the last
    pause / cancel / resume (``event``, ``at``, ``kept``, ``released``, ``resumed_from``).
    """
    out: dict[str, Any] = {
        HEARTBEAT_MARKER: HEARTBEAT_VERSION,
        "seq": seq,
        "cadence_s": cadence_s,
        "progress": progress,
        "resources": resources,
    }
    if report is not None:
        out["report"] = report
    return out


def progress_fraction(progress: Any) -> float | None:
    """0..1 from a progress dict (``fraction``, ``pct`` or ``step``/``total``) or a number."""
    if isinstance(progress, bool):
        return None
    if isinstance(progress, int | float):
        value = float(progress)
        return value / 100.0 if value > 1.0 else value
    if not isinstance(progress, dict):
        return None
    fraction = progress.get("fraction")
    if isinstance(fraction, int | float) and not isinstance(fraction, bool):
        return max(0.0, min(1.0, float(fraction)))
    pct = progress.get("pct")
    if isinstance(pct, int | float) and not isinstance(pct, bool):
        return max(0.0, min(1.0, float(pct) / 100.0))
    step, total = progress.get("step"), progress.get("total")
    if isinstance(step, int | float) and isinstance(total, int | float) and total > 0:
        return max(0.0, min(1.0, float(step) / float(total)))
    return None
