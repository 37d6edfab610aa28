"""The ``retry`` command: plan (the adapter's answer folded into the action plan), check,
journal the intent, call the backend with the command's key as its request id, settle; its
dry-run plan for ``irq retry --dry-run``; and its re-drive after a crash.

A retry differs from the other run actions in one way: its plan needs the backend (which
steps have journaled results, which failed), so planning is asynchronous and may itself be
refused (a step the run does not have, a run the backend still sees running).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from backend_adapters.base import Backend, BackendError
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import Principal
from console.gateway.command_book import Attempt, CommandBook
from console.gateway.command_policy import command_refusal, run_invocation
from console.gateway.hub import Hub
from console.gateway.journal_store import CommandRow, Intent
from console.gateway.protocol import Command
from console.gateway.run_actions import backend_for
from console.model import Action, ActionPlan, CommandResult, Outcome, Run
from console.prices import PriceTable
from console.retry_rules import retry_action_plan, retry_refusal
from console.work_at_risk import with_work_at_risk

#: how long the plan may take to read the run's steps from the backend
PLAN_TIMEOUT_S = 15.0

_OUTCOME_OF_ERROR: dict[str, Outcome] = {"conflict": "conflict", "forbidden": "forbidden"}


@dataclass(frozen=True)
class RetryRefusal:
    """Why a retry cannot be planned: the result's outcome, its error code and words."""

    outcome: Outcome
    error: str
    detail: str


class RetryCommands:
    def __init__(self, hub: Hub, book: CommandBook, backends: dict[str, Backend],
                 governance: ApprovalView, *, prices: PriceTable | None = None) -> None:
        self.hub = hub
        self.book = book
        self.backends = backends
        self.governance = governance
        self.prices = prices or PriceTable()  # the plan's work at risk in money

    # ------------------------------------------------------------------------ the plan

    async def plan_for(self, target: str, from_step: str | None) -> ActionPlan | RetryRefusal:
        """The plan ``irq retry --dry-run`` prints (and the TUI confirms), or why none."""
        run = self.hub.run(target)
        if run is None:
            return RetryRefusal("failed", "not_found", f"no such run: {target}")
        return await self._planned(run, backend_for(self.backends, run), from_step)

    async def _planned(self, run: Run, backend: Backend | None,
                       from_step: str | None) -> ActionPlan | RetryRefusal:
        if backend is None:
            return RetryRefusal("failed", "unreachable",
                                f"no adapter for {run.backend}:{run.context} in this gateway")
        cap = backend.capabilities().actions.get(Action.RETRY)
        if cap is None or not cap.supported:
            meaning = cap.meaning if cap else f"{run.backend} has no retry"
            return RetryRefusal("failed", "unsupported", meaning)
        refused = retry_refusal(run)
        if refused:
            return RetryRefusal("conflict", "conflict", refused)
        try:
            answer = await asyncio.wait_for(
                backend.retry_plan(run.native_id, from_step=from_step), PLAN_TIMEOUT_S)
        except BackendError as exc:
            return RetryRefusal(_OUTCOME_OF_ERROR.get(exc.code, "failed"), exc.code,
                                exc.message)
        except TimeoutError:
            return RetryRefusal("failed", "unreachable",
                                f"{run.backend} did not list the run's steps in "
                                f"{PLAN_TIMEOUT_S:g}s")
        return with_work_at_risk(retry_action_plan(run, answer), [run], self.hub.clock(),
                                 self.prices)

    # --------------------------------------------------------------------- the command

    async def run(self, cmd: Command, who: Principal, target: str) -> CommandResult:
        attempt = self.book.open(cmd, who, target, Action.RETRY.value)
        if isinstance(attempt, CommandResult):
            return attempt  # replayed: the same key was handled before
        run = self.hub.run(target)
        if run is None:
            return self.book.not_found(attempt, "run")
        backend = backend_for(self.backends, run)
        planned = await self._planned(run, backend, cmd.from_step)
        if isinstance(planned, RetryRefusal):
            attempt.plan = ActionPlan(action=Action.RETRY, targets=[target])
            return self.book.refuse(attempt, planned.outcome, planned.error, planned.detail)
        attempt.plan = planned
        refused = command_refusal(self.governance.engine(), run_invocation(
            Action.RETRY.value, run, identity=who.identity, role=who.role.value,
            reason=attempt.reason))
        if refused:
            return self.book.refuse(attempt, "forbidden", "forbidden", refused)
        assert backend is not None  # else refused while planning
        if attempt.dry_run:
            return attempt.result("planned", detail="dry run: nothing was done")
        if attempt.row is None:  # else: an intent a crash left, re-driven under its key
            begun = self.book.journal.begin(Intent(
                key=cmd.id, target=target, action=Action.RETRY.value, identity=who.identity,
                role=who.role.value, reason=cmd.reason, plan=planned.contract()))
            if begun.row is not None:
                return self.book.replayed(begun.row)
        self.book.crash_point("after_intent")
        result = await self._call(attempt, run, backend, planned.from_step)
        # the backend acted, the journal does not know yet: a crash here must not act twice
        self.book.crash_point("before_outcome")
        self.book.settle(who, cmd.reason, result)
        return result

    async def _call(self, attempt: Attempt, run: Run, backend: Backend,
                    from_step: str | None) -> CommandResult:
        """The backend call (the command's key is its request id: a repeated call, e.g. a
        re-drive after a crash, retries once), then what the hub shows."""
        with self.book.in_flight(attempt.key, attempt.target):
            answer = await self.book.call(attempt, backend.retry(
                run.native_id, from_step=from_step, request_id=attempt.key,
                reason=attempt.reason, identity=attempt.who.identity), run.backend)
            if isinstance(answer, CommandResult):
                return answer
            self.hub.unbind(run.id)  # whichever worker of the run's scope picks it up
            fresh = [run.native_id] + ([answer.new_native_id] if answer.new_native_id else [])
            await self._refresh(backend, fresh)
            result = attempt.result("applied", detail=answer.detail)
            if answer.new_native_id:
                result.new_run_id = Run.make_id(run.backend, run.context, answer.new_native_id)
            return result

    async def _refresh(self, backend: Backend, native_ids: list[str]) -> None:
        runs: list[Run] = []
        for native in native_ids:
            try:
                runs.append(await asyncio.wait_for(backend.get_run(native), 10))
            except (BackendError, TimeoutError):
                continue  # the next poll shows it
        if runs:
            self.hub.observe_runs(runs)

    async def recover(self, row: CommandRow, who: Principal) -> bool:
        """Re-drive a retry whose intent a crash left: the backend call again under the same
        request id (the adapter makes it happen once); False while the backend is
        unreachable (the intent stays for the next attempt)."""
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
            action=Action.RETRY, targets=[row.target])
        result = await self._call(attempt, run, backend, attempt.plan.from_step)
        if result.error == "unreachable":
            return False
        result.detail = f"{result.detail} ({self.book.redriven(row)})".strip()
        self.book.settle(who, row.reason, result)
        return True
