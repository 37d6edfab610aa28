"""Run actions (pause, resume, cancel, terminate): plan, check, journal the intent, call the
backend, settle; and their re-drive after a crash."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from backend_adapters.base import ActionOutcome, Backend, BackendError
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import Principal
from console.gateway.command_book import Attempt, CommandBook
from console.gateway.command_policy import command_refusal, run_invocation
from console.gateway.hub import Hub
from console.gateway.journal_store import CommandRow, Intent
from console.gateway.protocol import Command
from console.model import Action, ActionPlan, CommandResult, Run, RunState
from console.prices import PriceTable
from console.semantics import action_conflict, plan
from console.work_at_risk import with_work_at_risk

#: states that show an action already took effect (used when re-driving after a crash)
_IN_EFFECT = {
    Action.PAUSE: {RunState.PAUSED, RunState.PAUSING},
    Action.CANCEL: {RunState.CANCELLED, RunState.CANCELLING},
    Action.TERMINATE: {RunState.TERMINATED},
    Action.RESUME: {RunState.RUNNING, RunState.WAITING, RunState.LATE, RunState.BACKING_OFF,
                    RunState.COMPLETED},
}


class RunActions:
    def __init__(self, hub: Hub, book: CommandBook, backends: dict[str, Backend],
                 governance: ApprovalView, *, release_verify_s: float = 15.0,
                 prices: PriceTable | None = None) -> None:
        self.hub = hub
        self.book = book
        self.backends = backends
        self.governance = governance  # the loaded policy's engine (and four-eyes view)
        self.release_verify_s = release_verify_s
        self.prices = prices or PriceTable()  # the plans' work at risk in money

    def backend_for(self, run: Run) -> Backend | None:
        return backend_for(self.backends, run)

    def plan_for(self, action: Action, targets: list[str]) -> ActionPlan:
        runs = [r for t in targets if (r := self.hub.run(t)) is not None]
        ops: dict[str, list[str]] = {}
        for run in runs:
            backend = self.backend_for(run)
            cap = backend.capabilities().actions.get(action) if backend else None
            ops[run.id] = list(cap.operations_for(run.state)) if cap else []
        now = self.hub.clock()
        result = with_work_at_risk(plan(action, runs, operations=ops, now=now), runs, now,
                                   self.prices)
        missing = [t for t in targets if t not in self.hub.runs]
        result.warnings.extend(f"unknown run: {t}" for t in missing)
        return result

    async def run(self, cmd: Command, who: Principal, target: str) -> CommandResult:
        action = cmd.action
        attempt = self.book.open(cmd, who, target, action.value)
        if isinstance(attempt, CommandResult):
            return attempt
        run = self.hub.run(target)
        if run is None:
            return self.book.not_found(attempt, "run")
        backend = self.backend_for(run)
        attempt.plan = self.plan_for(action, [target])
        refused = self._refusal(attempt, action, run, backend)
        if refused is not None:
            return refused
        assert backend is not None  # else refused
        if attempt.dry_run:
            return attempt.result("planned", detail="dry run: nothing was done")
        if attempt.row is None:  # else: an intent a crash left, re-driven under its key
            begun = self.book.journal.begin(Intent(
                key=cmd.id, target=target, action=action.value, identity=who.identity,
                role=who.role.value, reason=cmd.reason, plan=attempt.plan.contract()))
            if begun.row is not None:
                return self.book.replayed(begun.row)
        self.book.crash_point("after_intent")
        result = await self._call(attempt, run, backend, action)
        self.book.settle(who, cmd.reason, result)
        return result

    def _refusal(self, attempt: Attempt, action: Action, run: Run,
                 backend: Backend | None) -> CommandResult | None:
        """Why ``action`` on ``run`` is refused before any intent (audited), or None."""
        if backend is None:
            return self.book.refuse(attempt, "failed", "unreachable",
                                    f"no adapter for {run.backend}:{run.context} in this gateway")
        cap = backend.capabilities().actions.get(action)
        if cap is None or not cap.supported:
            meaning = cap.meaning if cap else f"{run.backend} has no {action.value}"
            return self.book.refuse(attempt, "failed", "unsupported", meaning)
        conflict = action_conflict(action, run)
        if conflict:
            return self.book.refuse(attempt, "conflict", "conflict", conflict)
        refused = command_refusal(self.governance.engine(), run_invocation(
            action.value, run, identity=attempt.who.identity, role=attempt.who.role.value,
            reason=attempt.reason))
        if refused:
            return self.book.refuse(attempt, "forbidden", "forbidden", refused)
        return None

    async def _call(self, attempt: Attempt, run: Run, backend: Backend,
                    action: Action) -> CommandResult:
        """The backend call and what follows it, in flight until it returns."""
        with self.book.in_flight(attempt.key, attempt.target):
            sent_at = self.hub.clock()
            answer = await self.book.call(attempt, _backend_call(
                backend, action, run, reason=attempt.reason, identity=attempt.who.identity),
                run.backend)
            if isinstance(answer, CommandResult):
                return answer
            if action in (Action.PAUSE, Action.CANCEL):
                assert attempt.plan is not None  # planned before any intent
                released = {r.id for r in attempt.plan.resources_released}
                self.hub.expect_release(run.id, action.value, released, self.release_verify_s,
                                        since=sent_at)
            if action is Action.RESUME:  # whichever worker of the run's scope picks it up
                self.hub.unbind(run.id)
            await self._refresh_run(backend, run)
            return attempt.result("applied", detail=answer.detail)

    async def _refresh_run(self, backend: Backend, run: Run) -> None:
        try:
            fresh = await asyncio.wait_for(backend.get_run(run.native_id), 10)
        except (BackendError, TimeoutError):
            return
        self.hub.observe_runs([fresh])

    async def recover(self, row: CommandRow, who: Principal) -> bool:
        """Re-drive a run action whose intent a crash left: False while its backend is
        unreachable (the intent stays for the next attempt)."""
        action = Action(row.action)
        backend = self.backends.get(row.target.split("/", 1)[0])
        if backend is None:
            return False
        native = row.target.split("/", 1)[1]
        attempt = Attempt(row.key, row.action, row.target, who, row.reason, row=row)
        try:
            run = await backend.get_run(native)
        except BackendError as exc:
            if exc.code == "unreachable":
                return False
            self.book.settle(who, row.reason, attempt.result(
                "failed", error=exc.code, detail=exc.message))
            return True
        attempt.plan = ActionPlan.model_validate(row.plan) if row.plan else ActionPlan(
            action=action, targets=[row.target])
        if run.state in _IN_EFFECT.get(action, set()):
            result = attempt.result(
                "applied", detail="already in effect (checked after a gateway restart)")
        else:
            result = await self._call(attempt, run, backend, action)
            result.detail = f"{result.detail} ({self.book.redriven(row)})".strip()
        self.book.settle(who, row.reason, result)
        return True


def _backend_call(backend: Backend, action: Action, run: Run, *, reason: str,
                  identity: str) -> Coroutine[Any, Any, ActionOutcome]:
    """The adapter call for a run action, spelled out so the type checker sees each one."""
    native = run.native_id
    if action is Action.PAUSE:
        return backend.pause(native, reason=reason, identity=identity)
    if action is Action.RESUME:  # a lost run: the operator asks for a forced restart
        return backend.resume(native, reason=reason, identity=identity,
                              lost=run.state is RunState.LOST)
    if action is Action.CANCEL:
        return backend.cancel(native, reason=reason, identity=identity)
    if action is Action.TERMINATE:
        return backend.terminate(native, reason=reason, identity=identity)
    raise ValueError(f"{action.value} is not a run action")


def backend_for(backends: dict[str, Backend], run: Run) -> Backend | None:
    """The adapter of ``run``'s backend context in this gateway (None: none here)."""
    return backends.get(f"{run.backend}:{run.context}")
