"""Why a DBOS workflow failed or was given up, and when its last step was recorded.

DBOS keeps a failed workflow's exception in its status (listed only with ``load_output``)
and a failed step's exception in the step's row. The observer reads both for the ERROR and
MAX_RECOVERY_ATTEMPTS_EXCEEDED runs it reports (finished runs are reported once per change,
so this costs two reads per failure, not per poll).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dbos import DBOSClient, WorkflowStatus

from backend_adapters.dbos.mapping import HIDDEN_OPERATIONS, from_epoch_ms
from console.run_facts import RunError

#: DBOS statuses whose runs carry an error (failed, given up)
FAILED_STATUSES = ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


@dataclass(frozen=True)
class Failure:
    error: RunError
    last_step_at: datetime | None


def _describe(error: Any) -> tuple[str, str]:
    if isinstance(error, BaseException):
        return type(error).__name__, str(error)
    if error is None:
        return "", ""
    return "error", str(error)


def failure_of(status: WorkflowStatus, workflow_error: Any,
               steps: Iterable[Mapping[str, Any]]) -> Failure:
    """The run's error from its status and recorded steps (pure): the first failed step's
    exception, else the workflow's own (raised outside any step); for a run DBOS gave up on,
    the recovery limit and the step that was last recorded."""
    ordered = sorted((s for s in steps
                      if str(s.get("function_name") or "") not in HIDDEN_OPERATIONS),
                     key=lambda s: int(s.get("function_id") or 0))
    done = [from_epoch_ms(s.get("completed_at_epoch_ms")) for s in ordered]
    last_step_at = max((d for d in done if d is not None), default=None)
    updated = from_epoch_ms(getattr(status, "updated_at", None))
    if str(status.status) == "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
        after = f" after step {ordered[-1].get('function_name')}" if ordered else ""
        return Failure(RunError(
            type="MAX_RECOVERY_ATTEMPTS_EXCEEDED",
            message=f"DBOS stopped recovering it after {status.recovery_attempts} attempts "
            f"(its executor kept dying{after}); irq retry resumes it",
            step=None, at=updated), last_step_at)
    for step in ordered:
        if step.get("error") is not None:
            kind, message = _describe(step.get("error"))
            return Failure(RunError(
                type=kind, message=message[:2000], step=str(step.get("function_name") or ""),
                at=from_epoch_ms(step.get("completed_at_epoch_ms")) or updated), last_step_at)
    kind, message = _describe(workflow_error)
    return Failure(RunError(type=kind or "error", message=message[:2000], step=None,
                            at=updated), last_step_at)


def read_failures(client: DBOSClient, statuses: Iterable[WorkflowStatus]) -> dict[str, Failure]:
    """The failures of the failed and given-up runs among ``statuses`` (pool threads only)."""
    failed = [s for s in statuses if str(s.status) in FAILED_STATUSES]
    if not failed:
        return {}
    errors = {s.workflow_id: s.error for s in client.list_workflows(
        workflow_ids=[s.workflow_id for s in failed], load_input=False, load_output=True)}
    return {
        s.workflow_id: failure_of(s, errors.get(s.workflow_id),
                                  client.list_workflow_steps(s.workflow_id))
        for s in failed
    }
