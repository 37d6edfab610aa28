"""Retrying DBOS workflows: ``fork_workflow`` from a step, or ``resume_workflow`` for a run
DBOS gave up on (README.md, "Retry").

Measured on dbos 3.4 (``DBOSClient``):

- ``fork_workflow(id, start_step)`` copies the original's inputs and the recorded outputs of
  the steps with ``function_id < start_step`` into a new workflow (new id, ``forked_from``,
  ENQUEUED on DBOS's internal queue, no application version: an executor running the latest
  version picks it up). The workflow function runs again from the top: steps before
  ``start_step`` return their recorded outputs, code outside steps runs again.
- ``resume_workflow`` does nothing for ERROR runs; it brings back
  MAX_RECOVERY_ATTEMPTS_EXCEEDED (given up) and CANCELLED runs in place.

A repeated retry under one request id happens once: the fork's id is derived from the
original's id and the request id (``SetWorkflowID``), and a fork that exists already is the
answer; an in-place resume records the request id in ``irq.intent`` and is not repeated.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dbos import SetWorkflowID, WorkflowStatus

from backend_adapters.base import Conflict, InvalidInput
from backend_adapters.dbos.conventions import ACTIVE_STATUSES, ATTR_INTENT
from backend_adapters.dbos.mapping import HIDDEN_OPERATIONS, attributes_of, paused_by_irq
from backend_adapters.dbos.system_database import SystemDatabase
from console.run_facts import RetryOutcome, RetryPlan

#: the namespace of fork ids: one fork per (original, request id)
_FORK_NAMESPACE = uuid.UUID("7c1f3c52-4f0b-4d55-9a57-2f1f8b0a3c11")
_GIVEN_UP = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
_BODY_EFFECTS = (
    "workflow code outside steps in {name}: DBOS runs the workflow function again from "
    "the top (kept steps return their recorded results; code between them runs again)"
)


def fork_id(native_id: str, request_id: str) -> str:
    """The id of the fork a retry under ``request_id`` creates (the same for a repeat)."""
    return str(uuid.uuid5(_FORK_NAMESPACE, f"{native_id}\n{request_id}"))


@dataclass(frozen=True)
class _Step:
    index: int  # DBOS function_id
    name: str
    failed: bool


@dataclass(frozen=True)
class _Choice:
    """Where a retry starts and how (fork from ``start``, or resume in place)."""

    start: int  # first function_id that runs again
    label: str | None  # the step as the operator names it (None: from the start)
    in_place: bool
    plan: RetryPlan


def _steps(rows: Sequence[Mapping[str, Any]]) -> list[_Step]:
    """DBOS's recorded steps, ordered, without its bookkeeping rows."""
    out = [
        _Step(int(r.get("function_id") or 0), str(r.get("function_name") or ""),
              r.get("error") is not None)
        for r in rows
        if str(r.get("function_name") or "") not in HIDDEN_OPERATIONS
    ]
    return sorted(out, key=lambda s: s.index)


def _refuse_state(native_id: str, status: WorkflowStatus, ledger_paused: bool) -> None:
    native = str(status.status)
    if native in ACTIVE_STATUSES:
        raise Conflict(
            f"{native_id} is {native} in DBOS (executing, or its executor is dead): cancel it "
            "first (irq cancel), or resume it if it is lost (irq resume), then retry"
        )
    if native == "SUCCESS":
        raise Conflict(f"{native_id} completed (SUCCESS): there is nothing to retry")
    if native == "CANCELLED" and paused_by_irq(status, ledger_paused):
        raise Conflict(f"{native_id} is paused: resume it instead (irq resume)")


def _resolve(native_id: str, steps: list[_Step], from_step: str) -> int:
    """The function id ``from_step`` names: an index (``3``) or a unique step name."""
    last = max((s.index for s in steps), default=0)
    listing = ", ".join(f"{s.index} {s.name}" for s in steps) or "none recorded"
    text = from_step.strip()
    if text.isdigit():
        index = int(text)
        if 1 <= index <= last + 1:
            return index
        raise InvalidInput(
            f"{native_id} has no step {index}: retry from a recorded step (its steps: "
            f"{listing}) or {last + 1} (the first step not run yet)", target=native_id)
    named = [s.index for s in steps if s.name == text]
    if not named:
        raise InvalidInput(f"{native_id} has no step named {text!r} (its steps: {listing})",
                           target=native_id)
    if len(named) > 1:
        raise InvalidInput(
            f"{native_id} ran {text!r} {len(named)} times (steps "
            f"{', '.join(map(str, named))}): name the step by its index", target=native_id)
    return named[0]


def _default_start(steps: list[_Step]) -> int:
    """The failed step (the first one with a recorded error), else the step after the last
    recorded one (the workflow failed between steps, or was cancelled / given up there)."""
    for step in steps:
        if step.failed:
            return step.index
    return max((s.index for s in steps), default=0) + 1


def _label(steps: list[_Step], start: int) -> str:
    names = [s.name for s in steps if s.index == start]
    if names and sum(1 for s in steps if s.name == names[0]) == 1:
        return names[0]
    return str(start)


def choose(native_id: str, status: WorkflowStatus, rows: Sequence[Mapping[str, Any]],
           from_step: str | None, *, ledger_paused: bool) -> _Choice:
    """The retry's start and plan from the workflow's status and recorded steps (pure)."""
    _refuse_state(native_id, status, ledger_paused)
    native = str(status.status)
    steps = _steps(rows)
    start = _default_start(steps) if from_step is None else _resolve(native_id, steps, from_step)
    in_place = native == _GIVEN_UP and from_step is None
    kept = [s.name for s in steps if s.index < start]
    rerun = [s.name for s in steps if s.index >= start]
    effects = [f"{s.name} (ran before{' and failed' if s.failed else ''})"
               for s in steps if s.index >= start]
    last = max((s.index for s in steps), default=0)
    warnings: list[str] = []
    if start > last:
        rerun.append("the steps after the last recorded one (not run yet)")
    if in_place:
        effects.append("the step DBOS was recovering when it gave up (not journaled)")
        operations = [f"update_workflow_attributes({ATTR_INTENT}=retry)", "resume_workflow"]
        warnings.append(
            f"{native_id} was given up by DBOS after {status.recovery_attempts} recovery "
            "attempts: resume_workflow brings it back in place, from its last journaled step")
    else:
        operations = [f"update_workflow_attributes({ATTR_INTENT}=retry)",
                      f"fork_workflow({native_id}, start_step={start})"]
        warnings.append(
            "the new run is picked up by an executor running the latest application version "
            f"(DBOS's fork default; {native_id} ran on {status.app_version or 'an unknown one'})")
    effects.append(_BODY_EFFECTS.format(name=status.name or "the workflow"))
    plan = RetryPlan(
        from_step=None if start <= 1 and not steps else _label(steps, start),
        steps_kept=kept, will_rerun=rerun, unjournaled_effects=effects,
        operations=operations, warnings=warnings, new_run=not in_place, any_step=True)
    return _Choice(start, plan.from_step, in_place, plan)


class DBOSRetry:
    """Retry's plan and execution on one system database."""

    def __init__(self, database: SystemDatabase) -> None:
        self._database = database

    def _choice_sync(self, native_id: str, from_step: str | None,
                     ledger_paused: bool) -> tuple[WorkflowStatus, _Choice]:
        status = self._database.status(native_id)
        rows = self._database.connected().list_workflow_steps(native_id)
        return status, choose(native_id, status, rows, from_step, ledger_paused=ledger_paused)

    async def plan(self, native_id: str, *, from_step: str | None,
                   ledger_paused: bool) -> RetryPlan:
        _, choice = await self._database.call(
            self._choice_sync, native_id, from_step, ledger_paused)
        return choice.plan

    def _retry_sync(self, native_id: str, *, from_step: str | None, request_id: str,
                    by: str, reason: str, ledger_paused: bool) -> RetryOutcome:
        client = self._database.connected()
        new_id = fork_id(native_id, request_id)
        done = client.list_workflows(workflow_ids=[new_id], load_input=False, load_output=False)
        if done:  # this request forked already (a repeat, or a re-drive after a crash)
            return RetryOutcome(detail=f"already retried under this key as new run {new_id}",
                                new_native_id=new_id)
        status = self._database.status(native_id)
        intent = attributes_of(status).get(ATTR_INTENT)
        if (str(status.status) in ACTIVE_STATUSES and isinstance(intent, dict)
                and intent.get("request_id") == request_id):
            return RetryOutcome(detail="already retried under this key (resumed in place)")
        choice = choose(native_id, status, client.list_workflow_steps(native_id), from_step,
                        ledger_paused=ledger_paused)
        # written before the fork, which copies the attributes: the new run reads "retry",
        # not the cancel intent a cancelled original carries
        client.update_workflow_attributes(native_id, {ATTR_INTENT: {
            "action": "retry", "by": by, "reason": reason, "request_id": request_id,
            "at": datetime.now(UTC).isoformat()}}, merge=True)
        if choice.in_place:
            client.resume_workflow(native_id)
            after = self._database.status(native_id)
            if str(after.status) not in ACTIVE_STATUSES:
                raise Conflict(f"{native_id} is {after.status} after resume_workflow")
            return RetryOutcome(
                detail=f"resume_workflow: {status.status} -> {after.status}; continues from "
                "its last journaled step", operations=choice.plan.operations)
        with SetWorkflowID(new_id):
            client.fork_workflow(native_id, choice.start)
        kept = len(choice.plan.steps_kept)
        return RetryOutcome(
            detail=f"fork_workflow: new run {new_id} from step {choice.start}"
            f"{f' ({choice.label})' if choice.label else ''}; {kept} step(s) reuse their "
            "journaled results", operations=choice.plan.operations, new_native_id=new_id)

    async def retry(self, native_id: str, *, from_step: str | None, request_id: str,
                    reason: str, identity: str, ledger_paused: bool) -> RetryOutcome:
        return await self._database.call(
            self._retry_sync, native_id, from_step=from_step, request_id=request_id,
            by=identity, reason=reason, ledger_paused=ledger_paused)
