"""Retrying Restate invocations: resume a given-up one in place, restart a failed, cancelled
or killed one as a new invocation from a journal position (README.md, "Retry").

Measured on restate-server 1.7.12 / restate-sdk 1.3.0:

- ``PATCH /invocations/ID/resume`` on an invocation Restate paused after its last attempt
  runs it again at once: the journaled ``ctx.run`` results are replayed, the failing
  ``ctx.run`` runs again.
- ``PATCH /invocations/ID/restart-as-new?from=N`` works on *completed* invocations only
  (failed, cancelled, killed; a paused one -> 409 "still running") and answers
  ``{"new_invocation_id": …}``; the new row has ``restarted_from`` = the original.
  ``from=N`` copies journal entries 0..N *included* plus the completions of the commands
  among them (so ``from`` = the entry before the first step to run again); a prefix with a
  command never completed -> 400. It needs the original's journal: 1.7.12 keeps journals of
  completed invocations for ``journal_retention`` (1 day by default; 410 once it is gone).
  A killed invocation can be restarted 30 ms after the kill.
- Neither call takes an idempotency key, so irq keeps one per process (request id -> the
  outcome) and, across restarts, refuses a second restart of an invocation that Restate
  already shows as ``restarted_from`` (the gateway's command book replays a settled command
  by its key before the adapter is asked).
- Handler code outside ``ctx.run`` is not journaled: Restate replays the handler from the
  top, so that code runs again on every retry (only ``ctx.run`` results are kept).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from backend_adapters.base import Conflict, InvalidInput, NotFound
from backend_adapters.restate.http_api import RestateHttp, sql_literal
from backend_adapters.restate.journal_view import JournalView, read_journal
from console.model import JournalStep, Run, RunState
from console.run_facts import RetryOutcome, RetryPlan

_BODY_EFFECTS = (
    "handler code outside ctx.run in {target}: Restate replays the handler from the top "
    "(kept ctx.run results are replayed; code between them runs again)"
)
_RETRYABLE = (RunState.GIVEN_UP, RunState.FAILED, RunState.CANCELLED, RunState.TERMINATED)

How = Literal["resume", "restart", "kill_restart"]


@dataclass(frozen=True)
class RetryChoice:
    """Where a retry starts and how: resume in place, or restart as new ``?from=``."""

    how: How
    from_index: int | None  # restart-as-new ``from`` (None: resume)
    plan: RetryPlan


def refuse_state(run: Run) -> None:
    """Conflict for an invocation a retry does not fit, naming what to do instead."""
    if run.state in _RETRYABLE:
        return
    native = str(run.details.get("restate_status") or run.native_state)
    inv = run.native_id
    if run.state is RunState.COMPLETED:
        raise Conflict(f"{inv} completed successfully: there is nothing to retry", target=inv)
    if run.state is RunState.BACKING_OFF:
        attempt = f" (attempt {run.retrying.attempt} next)" if run.retrying else ""
        raise Conflict(
            f"{inv} is backing-off: Restate is still retrying it{attempt}; `irq resume` "
            "retries now, or cancel it first (irq cancel), then retry", target=inv)
    if run.state in (RunState.PAUSED, RunState.PAUSING):
        raise Conflict(
            f"{inv} is paused by an operator: resume it instead (irq resume); it continues "
            "from its last journaled step", target=inv)
    raise Conflict(
        f"{inv} is {native} in Restate (not finished): cancel it (irq cancel) or terminate it "
        "first, then retry; a run waiting for a decision can be answered instead", target=inv)


def _listing(steps: list[JournalStep]) -> str:
    return ", ".join(f"{s.index} {s.name}" for s in steps) or "none journaled"


def resolve_step(inv: str, steps: list[JournalStep], from_step: str) -> JournalStep:
    """The journal step ``from_step`` names: its index or its unique name, as irq show
    lists them."""
    text = from_step.strip()
    if text.isdigit():
        found = [s for s in steps if s.index == int(text)]
        if found:
            return found[0]
        raise InvalidInput(
            f"{inv} has no journal step {text} (its steps: {_listing(steps)})", target=inv)
    named = [s for s in steps if s.name == text]
    if not named:
        raise InvalidInput(
            f"{inv} has no step named {text!r} (its steps: {_listing(steps)})", target=inv)
    if len(named) > 1:
        raise InvalidInput(
            f"{inv} journaled {text!r} {len(named)} times (entries "
            f"{', '.join(str(s.index) for s in named)}): name the step by its index",
            target=inv)
    return named[0]


def failing_step(run: Run, view: JournalView) -> JournalStep | None:
    """The step the invocation failed in: a failed result, else the step in flight (a
    given-up ``ctx.run`` has no result), else the step named by the error."""
    for step in view.steps:
        if step.status == "failed":
            return step
    for step in view.steps:
        if step.status == "in_flight":
            return step
    named = [s for s in view.steps if run.error and s.name == run.error.step]
    return named[-1] if named else None


def choose(
    run: Run, view: JournalView, from_step: str | None, *, restarted_as: list[str],
    service_ty: str = "",
) -> RetryChoice:
    """The retry's start and plan from the invocation's state and journal (pure)."""
    refuse_state(run)
    inv = run.native_id
    steps = view.steps
    failing = failing_step(run, view)
    start = failing if from_step is None else resolve_step(inv, steps, from_step)
    in_place = run.state is RunState.GIVEN_UP and (
        start is None or failing is None or start.index == failing.index)
    # restart-as-new ``from`` = the last entry kept: the one before the first step to re-run,
    # or (nothing failed in a step: it failed between steps) every step kept
    if start is None:
        from_index = max((s.index for s in steps), default=0)
    else:
        from_index = start.index - 1
    first = start.index if start is not None else from_index + 1
    kept = [s.name for s in steps if s.index < first]
    rerun = [s.name for s in steps if s.index >= first]
    effects = [_effect(s) for s in steps if s.index >= first and s.index not in view.waits]
    effects.append(_BODY_EFFECTS.format(target=run.name or inv))
    if start is None:
        rerun.append("the handler code after the last journaled step")
    warnings: list[str] = []
    if restarted_as:
        warnings.append(
            f"{inv} was already restarted as {', '.join(restarted_as)}: retry that one instead")
    if in_place:
        operations = [f"PATCH /invocations/{inv}/resume"]
        warnings.append(
            f"{inv} was given up by Restate after its retry policy ran out: resume runs it "
            "again at once, in place, from the failing step")
        how: How = "resume"
    else:
        operations = [f"PATCH /invocations/{inv}/restart-as-new?from={from_index}"]
        how = "restart"
        if run.state is RunState.GIVEN_UP:
            operations.insert(0, f"PATCH /invocations/{inv}/kill")
            how = "kill_restart"
            warnings.append(
                f"{inv} is given up (paused): Restate restarts only completed invocations "
                "from a chosen step, so irq kills it first and restarts it as a new one")
        if service_ty == "workflow":
            warnings.append("Restate 1.7 cannot restart a workflow as new (its CLI says so): "
                            "the restart may be refused")
    plan = RetryPlan(
        from_step=start.name if start is not None else None,
        steps_kept=kept,
        will_rerun=rerun,
        unjournaled_effects=effects,
        operations=operations,
        warnings=warnings,
        new_run=not in_place,
        any_step=True,
    )
    return RetryChoice(how=how, from_index=None if in_place else from_index, plan=plan)


def _effect(step: JournalStep) -> str:
    if step.status == "failed":
        return f"{step.name} (ran before and failed)"
    if step.status == "in_flight":
        return f"{step.name} (ran before; no result was journaled)"
    return f"{step.name} (ran before; its journaled result is not reused)"


class RestateRetries:
    """Retry's calls on one Restate server; ``load_run`` is the adapter's fresh read of one
    invocation (its state, given-up or paused by irq included)."""

    def __init__(
        self, http: RestateHttp, load_run: Callable[[str], Awaitable[Run]], *,
        verify_s: float = 10.0,
    ) -> None:
        self._http = http
        self._load_run = load_run
        self._verify_s = verify_s
        #: request id -> what that retry did (a repeat in this process answers the same)
        self._done: dict[str, RetryOutcome] = {}

    async def _facts(self, native_id: str) -> tuple[Run, JournalView, list[str], str]:
        run = await self._load_run(native_id)
        lit = sql_literal(native_id)
        journal, restarts, rows = await asyncio.gather(
            self._http.query(
                "SELECT id, index, entry_type, name, entry_json, appended_at FROM sys_journal "
                f"WHERE id = {lit} AND entry_type <> 'Command: Input'"),
            self._http.query(
                f"SELECT id FROM sys_invocation WHERE restarted_from = {lit} "
                "ORDER BY created_at"),
            self._http.query(
                f"SELECT target_service_ty FROM sys_invocation WHERE id = {lit}"),
        )
        service_ty = str(rows[0].get("target_service_ty") or "") if rows else ""
        return run, read_journal(journal), [str(r.get("id")) for r in restarts], service_ty

    async def plan(self, native_id: str, from_step: str | None) -> RetryPlan:
        run, view, restarts, ty = await self._facts(native_id)
        return choose(run, view, from_step, restarted_as=restarts, service_ty=ty).plan

    async def retry(self, native_id: str, from_step: str | None, request_id: str) -> RetryOutcome:
        done = self._done.get(request_id)
        if done is not None:
            return done.model_copy(update={"detail": f"already retried under this key: "
                                                     f"{done.detail}"})
        run, view, restarts, ty = await self._facts(native_id)
        choice = choose(run, view, from_step, restarted_as=restarts, service_ty=ty)
        if choice.how != "resume" and restarts:
            raise Conflict(
                f"{native_id} was already restarted as {', '.join(restarts)}: retry "
                f"{restarts[-1]} instead", target=native_id)
        if choice.how == "resume":
            outcome = await self._resume(native_id, choice)
        else:
            outcome = await self._restart(native_id, choice)
        self._done[request_id] = outcome
        return outcome

    async def _resume(self, inv: str, choice: RetryChoice) -> RetryOutcome:
        code, message = await self._http.control(inv, "resume")
        if code >= 300:
            raise Conflict(f"resume of {inv} refused ({code}): {message}", target=inv)
        step = choice.plan.from_step or "the failing step"
        return RetryOutcome(
            detail=f"resumed in place: {step} runs again now; {len(choice.plan.steps_kept)} "
            "step(s) replay their journaled results",
            operations=[f"PATCH /invocations/{inv}/resume -> {code}"],
        )

    async def _restart(self, inv: str, choice: RetryChoice) -> RetryOutcome:
        ops: list[str] = []
        if choice.how == "kill_restart":
            code, message = await self._http.control(inv, "kill")
            ops.append(f"PATCH /invocations/{inv}/kill -> {code}")
            if code >= 300:
                raise Conflict(f"kill of {inv} refused ({code}): {message}", target=inv)
        from_index = choice.from_index or 0
        deadline = time.monotonic() + self._verify_s
        while True:
            code, answer = await self._http.restart_as_new(inv, from_index)
            # a kill completes the invocation a few ms later: until then Restate says running
            if code != 409 or choice.how != "kill_restart" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        ops.append(f"PATCH /invocations/{inv}/restart-as-new?from={from_index} -> {code}")
        _refuse_reply(inv, code, answer)
        return RetryOutcome(
            detail=f"restarted as new invocation {answer} from journal entry {from_index}"
            f"{f' ({choice.plan.from_step} runs again)' if choice.plan.from_step else ''}; "
            f"{len(choice.plan.steps_kept)} step(s) keep their journaled results",
            operations=ops,
            new_native_id=answer,
        )


def _refuse_reply(inv: str, code: int, answer: str) -> None:
    if code == 200 and answer:
        return
    if code == 404:
        raise NotFound(f"no Restate invocation {inv}", target=inv)
    if code == 400:
        raise InvalidInput(f"Restate refused to restart {inv} there: {answer}", target=inv)
    if code == 410:
        raise Conflict(
            f"{inv}'s journal is no longer kept (journal_retention ran out): Restate cannot "
            f"restart it ({answer})", target=inv)
    raise Conflict(f"restart-as-new of {inv} refused ({code}): {answer}", target=inv)

