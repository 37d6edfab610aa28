"""The ``release`` command (``irq release RUN RESOURCE --force``): free one resource of a run
by the release declared for its kind, then verify it on the run's next observation.

Two ways, the config first (it is the operator's own word for that kind):

- ``command``: the config declares ``[resources.KIND] release_command``; it runs as an argv
  with the run id and resource id appended (release_program.py);
- ``agent``: the agent bound to the run is connected and registered a release callback
  (``backend_adapters.release_callbacks.on_release``); it is asked on the agent channel
  (agent_links.py) and pushes the run's next beat, with the resource released, before it
  answers.

Neither: refused, naming both ways to declare one. Like every command: the plan, the
policy, the journal's intent before acting (key: the client's idempotency key), the outcome
and the audit (command_book.py). The result is ``applied`` when the release ran, with
``release.verified`` saying whether the run's next observation (an agent beat since the
release; for a run that ended, the adapter's read right after it) reports the resource
released or no longer lists it. What is not verified is marked ``suspected_leak`` in the
run's latest beat (release_checks.py), so ``irq leaks`` keeps listing it until a report says
it is free.
"""

from __future__ import annotations

import asyncio
import shlex
import uuid
from dataclasses import dataclass
from datetime import datetime

from backend_adapters.base import Backend, BackendError
from console.gateway.agent_beats import Reporter
from console.gateway.agent_links import AgentLinks
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import Principal
from console.gateway.command_book import Attempt, CommandBook
from console.gateway.command_policy import command_refusal, run_invocation
from console.gateway.hub import Hub
from console.gateway.journal_store import CommandRow, Intent
from console.gateway.protocol import Command
from console.gateway.release_frames import release_request_frame
from console.gateway.release_program import release_argv, run_release_program
from console.gateway.run_actions import backend_for
from console.model import (
    Action,
    ActionPlan,
    CommandResult,
    Outcome,
    PlannedResource,
    Resource,
    Run,
)
from console.release_outcome import ReleaseOutcome, ReleaseWay

AGENT_ANSWER_S = 15.0  # how long the agent's release callback may take to answer
READ_TIMEOUT_S = 10.0  # the adapter's read of the run after the release
AUDIT_LINES = 5  # of the release command's output, in the detail (the result has 20)


@dataclass(frozen=True)
class ReleaseRefusal:
    """Why no release can be planned: the result's outcome, its error code and words."""

    outcome: Outcome
    error: str
    detail: str


@dataclass(frozen=True)
class PlannedRelease:
    run: Run
    resource: Resource
    way: ReleaseWay
    plan: ActionPlan
    program: list[str]  # command: the configured argv (without the ids)
    agent: Reporter | None  # agent: the token bound to the run


def no_release_declared(kind: str) -> str:
    """The refusal naming both ways to declare a release for ``kind``."""
    return (f"no release is declared for {kind} resources: declare one in the config file "
            f"([resources.{kind}] release_command = [\"/path/to/free-{kind}\"], called with "
            f"RUN_ID RESOURCE_ID), or register a release callback in the agent "
            f"(on_release(\"{kind}\", free) from backend_adapters.release_callbacks) and keep "
            "it connected to this gateway")


class ReleaseCommands:
    def __init__(self, hub: Hub, book: CommandBook, backends: dict[str, Backend],
                 governance: ApprovalView, programs: dict[str, list[str]], links: AgentLinks,
                 *, verify_s: float = 15.0, answer_s: float = AGENT_ANSWER_S) -> None:
        """``programs``: resource kind -> release argv (the config's ``[resources.KIND]``);
        ``verify_s``: how long a live run's next beat is waited for."""
        self.hub = hub
        self.book = book
        self.backends = backends
        self.governance = governance
        self.programs = programs
        self.links = links
        self.verify_s = verify_s
        self.answer_s = answer_s

    # ------------------------------------------------------------------------ the plan

    def plan_for(self, target: str, resource_id: str | None) -> PlannedRelease | ReleaseRefusal:
        """What ``irq release`` confirms (and the command then does), or why nothing."""
        run = self.hub.run(target)
        if run is None:
            return ReleaseRefusal("failed", "not_found", f"no such run: {target}")
        resource = next((r for r in run.resources if r.id == resource_id), None)
        if resource is None:
            held = ", ".join(r.id for r in run.resources) or "none"
            return ReleaseRefusal("failed", "not_found",
                                  f"{target} reports no resource {resource_id!r} "
                                  f"(its resources: {held})")
        if resource.state == "released":
            return ReleaseRefusal("conflict", "conflict",
                                  f"{target} already reports {resource.id} released")
        program = self.programs.get(resource.kind, [])
        bound = self.hub.bound_to(run.id)
        agent = bound if bound is not None and self.links.connected(bound.token_id) else None
        if not program and agent is None:
            return ReleaseRefusal("failed", "unsupported", no_release_declared(resource.kind))
        way: ReleaseWay = "command" if program else "agent"
        operation = (f"run {shlex.join(release_argv(program, run.id, resource.id))}"
                     if program else
                     f"ask the agent ({agent.identity if agent else '?'}) to call its release "
                     f"callback for {resource.kind} {resource.id}")
        warnings = [] if run.state.terminal else [
            f"{run.id} is {run.state.value}: it may still be using {resource.id}"]
        plan = ActionPlan(
            action=Action.RELEASE, targets=[run.id], operations=[operation],
            resources_released=[PlannedResource(run_id=run.id, id=resource.id,
                                                kind=resource.kind)],
            warnings=[*warnings, "verified on the run's next observation; until then it "
                      "stays a suspected leak"])
        return PlannedRelease(run, resource, way, plan, program, agent)

    # --------------------------------------------------------------------- the command

    async def run(self, cmd: Command, who: Principal, target: str) -> CommandResult:
        attempt = self.book.open(cmd, who, target, Action.RELEASE.value)
        if isinstance(attempt, CommandResult):
            return attempt  # replayed: the same key was handled before
        if target not in self.hub.runs:
            return self.book.not_found(attempt, "run")
        planned = self.plan_for(target, cmd.resource)
        if isinstance(planned, ReleaseRefusal):
            attempt.plan = ActionPlan(action=Action.RELEASE, targets=[target])
            return self.book.refuse(attempt, planned.outcome, planned.error, planned.detail)
        attempt.plan = planned.plan
        refused = command_refusal(self.governance.engine(), run_invocation(
            Action.RELEASE.value, planned.run, identity=who.identity, role=who.role.value,
            reason=attempt.reason))
        if refused:
            return self.book.refuse(attempt, "forbidden", "forbidden", refused)
        if attempt.dry_run:
            return attempt.result("planned", detail="dry run: nothing was done")
        if attempt.row is None:  # else: an intent a crash left, re-driven under its key
            begun = self.book.journal.begin(Intent(
                key=cmd.id, target=target, action=Action.RELEASE.value,
                identity=who.identity, role=who.role.value, reason=cmd.reason,
                payload={"resource": planned.resource.id}, plan=planned.plan.contract()))
            if begun.row is not None:
                return self.book.replayed(begun.row)
        self.book.crash_point("after_intent")
        with self.book.in_flight(attempt.key, target):
            result = await self._release(attempt, planned)
        self.book.settle(who, cmd.reason, result)
        return result

    async def _release(self, attempt: Attempt, planned: PlannedRelease) -> CommandResult:
        run, resource = planned.run, planned.resource
        outcome = ReleaseOutcome(resource=resource.id, kind=resource.kind, way=planned.way)
        since = self.hub.clock()
        failed = (await self._by_program(attempt, planned, outcome) if planned.way == "command"
                  else await self._by_agent(attempt, planned, outcome))
        if failed is not None:
            failed.release = outcome
            return failed
        outcome.verified = await self._verify(run, resource.id, since)
        if outcome.verified:
            words = "verified: the run's next report shows it released"
        else:
            self.hub.releases.mark_suspected(run.id, {resource.id})
            self.hub.run_store.refresh(run.id, self.hub.clock())
            words = ("not yet verified: the run's next observation still shows it held; it "
                     "stays a suspected leak until a report shows it released")
        how = ("release command" + _ran(outcome) if planned.way == "command"
               else "agent's release callback")
        result = attempt.result("applied", detail=f"{resource.kind} {resource.id} released by "
                                f"the {how}; {words}")
        result.release = outcome
        return result

    async def _by_program(self, attempt: Attempt, planned: PlannedRelease,
                          outcome: ReleaseOutcome) -> CommandResult | None:
        """Run the configured command; a failed result, or None when it exited 0."""
        ran = await run_release_program(
            planned.program, run_id=planned.run.id, resource_id=planned.resource.id,
            kind=planned.resource.kind, key=attempt.key)
        outcome.program, outcome.exit_code, outcome.output = ran.argv, ran.exit_code, ran.output
        if ran.succeeded:
            return None
        why = ran.error or f"{ran.argv[0]} exited {ran.exit_code}"
        return attempt.result("failed", error="release_failed",
                              detail=f"release command failed ({why}){_ran(outcome)}")

    async def _by_agent(self, attempt: Attempt, planned: PlannedRelease,
                        outcome: ReleaseOutcome) -> CommandResult | None:
        """Ask the run's agent; a failed result, or None when its callback returned."""
        agent = planned.agent
        frame = release_request_frame(f"rel-{uuid.uuid4().hex}", planned.run.id,
                                      planned.resource.id, planned.resource.kind,
                                      attempt.reason)
        answer = (await self.links.ask_release(agent.token_id, frame, self.answer_s)
                  if agent is not None else None)
        if answer is None:
            return attempt.result("failed", error="unreachable", detail=(
                f"the run's agent did not answer the release request within "
                f"{self.answer_s:g}s; nothing is known to be released"))
        outcome.agent_detail = answer.detail
        if answer.outcome == "released":
            return None
        if answer.outcome == "no_callback":
            return attempt.result("failed", error="unsupported", detail=(
                f"the agent has no release callback for {planned.resource.id}; "
                + no_release_declared(planned.resource.kind)))
        if answer.outcome == "unknown_run":
            return attempt.result("failed", error="unreachable", detail=(
                f"no connected process of the run's agent token reports {planned.run.id}"))
        return attempt.result("failed", error="release_failed",
                              detail=f"the agent's release callback failed: {answer.detail}")

    # ----------------------------------------------------------------- verification

    async def _verify(self, run: Run, resource_id: str, since: datetime) -> bool:
        """The run's next observation: an agent beat accepted since the release; for a run
        that ended (its agent beats no more), the adapter's read of it now. Released, or no
        longer listed: verified."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.verify_s
        beats = self.hub.beats.facts.get(run.id) is not None and not run.state.terminal
        if not beats:
            await self._read(run)
        while True:
            reported = self.hub.releases.reported_since(run.id, since)
            if reported is not None:
                return _free(reported, resource_id)
            if not beats:
                fresh = self.hub.runs.get(run.id)
                return fresh is not None and _free(fresh.resources, resource_id)
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def _read(self, run: Run) -> None:
        backend = backend_for(self.backends, run)
        if backend is None:
            return
        try:
            fresh = await asyncio.wait_for(backend.get_run(run.native_id), READ_TIMEOUT_S)
        except (BackendError, TimeoutError):
            return  # judged on what the hub shows
        self.hub.observe_runs([fresh])

    # ------------------------------------------------------------------------ re-drive

    async def recover(self, row: CommandRow, who: Principal) -> bool:
        """Re-drive a release whose intent a crash left: planned again from what the hub
        shows now and done under the same key (a release callback must be idempotent; a
        release command gets the key in IRQ_RELEASE_KEY); False while the run is not shown
        yet (the intent stays for the next attempt)."""
        if row.target not in self.hub.runs:
            return False
        attempt = Attempt(row.key, row.action, row.target, who, row.reason, row=row)
        resource = str(row.payload.get("resource") or "")
        planned = self.plan_for(row.target, resource)
        if isinstance(planned, ReleaseRefusal):
            attempt.plan = ActionPlan(action=Action.RELEASE, targets=[row.target])
            result = attempt.result(planned.outcome, error=planned.error,
                                    detail=planned.detail)
        else:
            attempt.plan = planned.plan
            with self.book.in_flight(attempt.key, attempt.target):
                result = await self._release(attempt, planned)
        result.detail = f"{result.detail} ({self.book.redriven(row)})".strip()
        self.book.settle(who, row.reason, result)
        return True


def _ran(outcome: ReleaseOutcome) -> str:
    """The exit code and last output lines, for the result's detail and the audit."""
    code = f" (exit {outcome.exit_code})" if outcome.exit_code is not None else ""
    tail = " | ".join(outcome.output[-AUDIT_LINES:])
    return code + (f"; output: {tail}" if tail else "")


def _free(resources: list[Resource], resource_id: str) -> bool:
    return all(r.state == "released" for r in resources if r.id == resource_id)
