"""Executes operator commands: plan, journal the intent, call the backend, journal the outcome,
audit. Idempotent by the client's key; decisions are claimed per interrupt so a second decision
on the same interrupt (from any client, on any gateway sharing the journal) is a conflict, never
a second delivery.

A command is a straight line over the journal (journal_store.py): checks on the hub's state,
``begin`` (replay, or intent + decision claim in one transaction), the backend call, ``settle``
(outcome + claim + audit in one transaction). A refusal before ``begin`` is only audited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from backend_adapters.base import ActionOutcome, Backend, BackendError
from console.decision_check import DecisionProblem, check_decision
from console.gateway.approval_store import ApprovalStore, RecordedCommand
from console.gateway.auth import Principal
from console.gateway.command_policy import (
    CommandPolicyEngine,
    EngineProvider,
    InterruptRule,
    already_approved,
    approved_args,
    command_refusal,
    interrupt_rule,
    recorded_text,
    role_refusal,
    run_invocation,
    with_approvals,
)
from console.gateway.hub import Hub
from console.gateway.journal_store import (
    AlsoWrite,
    CommandRow,
    DecisionClaim,
    DuplicateRow,
    Intent,
    JournalStore,
    Settlement,
)
from console.gateway.protocol import Command
from console.gateway.refusals import RefusalLedger
from console.model import (
    Action,
    ActionPlan,
    AuditEntry,
    CommandResult,
    Decision,
    DecisionKind,
    Interrupt,
    Outcome,
    Role,
    Run,
    RunState,
    utcnow,
)
from console.semantics import action_conflict, plan

BACKEND_CALL_TIMEOUT_S = 30.0

#: states that show an action already took effect (used when re-driving after a crash)
_IN_EFFECT = {
    Action.PAUSE: {RunState.PAUSED, RunState.PAUSING},
    Action.CANCEL: {RunState.CANCELLED, RunState.CANCELLING},
    Action.TERMINATE: {RunState.TERMINATED},
    Action.RESUME: {RunState.RUNNING, RunState.WAITING, RunState.LATE, RunState.BACKING_OFF,
                    RunState.COMPLETED},
}

_ERROR_OUTCOME: dict[str, Outcome] = {"conflict": "conflict", "forbidden": "forbidden"}


class CommandExecutor:
    def __init__(
        self,
        hub: Hub,
        journal: JournalStore,
        backends: dict[str, Backend],
        *,
        release_verify_s: float = 15.0,
        fault_hook: Callable[[str], None] | None = None,
        policy_engine: EngineProvider | None = None,
    ) -> None:
        self.hub = hub
        self.journal = journal
        self.backends = backends
        #: the loaded policy's engine, asked per command (command_policy.py); None: no policy
        self.policy_engine = policy_engine
        #: four-eyes approvals, in the journal (approval_store.py)
        self.approvals = ApprovalStore(journal)
        hub.interrupt_overlay = self.show_approvals
        self.release_verify_s = release_verify_s
        #: test-only seam, called at named points of a command (``after_intent``); only the
        #: crash-safety tests set it (tests/support/faulty_gateway.py), never shipped code
        self.fault_hook = fault_hook
        self._inflight: set[tuple[str, str]] = set()
        #: set by the gateway: refused commands are audited in summary (refusals.py)
        self.refusals: RefusalLedger | None = None
        #: backends (``backend:context``) not read once yet since this gateway started (the
        #: gateway fills it and empties it as each first poll succeeds): until then an unknown
        #: run or interrupt may just not be read yet, so it is not answered ``not_found``
        self.unread: set[str] = set()

    # ----------------------------------------------------------------------- planning

    def backend_for(self, run: Run) -> Backend | None:
        return self.backends.get(f"{run.backend}:{run.context}")

    def plan_for(self, action: Action, targets: list[str]) -> ActionPlan:
        runs = [self.hub.runs[t] for t in targets if t in self.hub.runs]
        ops: dict[str, list[str]] = {}
        for run in runs:
            backend = self.backend_for(run)
            cap = backend.capabilities().actions.get(action) if backend else None
            ops[run.id] = list(cap.operations_for(run.state)) if cap else []
        result = plan(action, runs, operations=ops)
        missing = [t for t in targets if t not in self.hub.runs]
        result.warnings.extend(f"unknown run: {t}" for t in missing)
        return result

    # ---------------------------------------------------------------------- execution

    async def execute(self, cmd: Command, who: Principal) -> list[CommandResult]:
        if not who.role.at_least(Role.OPERATOR) and not cmd.dry_run:
            results = [
                CommandResult(id=cmd.id, action=cmd.action.value, target=t, outcome="forbidden",
                              error="forbidden",
                              detail=f"role {who.role.value} cannot {cmd.action.value}; "
                              "operator or admin required")
                for t in cmd.targets
            ]
            if self.refusals is not None:  # summarised: a refusal flood is two rows, not N
                self.refusals.refuse(
                    identity=who.identity, role=who.role.value, action=cmd.action.value,
                    target=cmd.targets[0], code="forbidden", reason=cmd.reason,
                    items=len(cmd.targets), command_id=cmd.id,
                    detail=results[0].detail + (f" ({len(cmd.targets)} targets)"
                                                if len(cmd.targets) > 1 else ""))
            else:
                for r in results:
                    self._audit(who, r, cmd.reason)
            return results
        if cmd.action is Action.DECIDE:
            assert cmd.decision is not None
            decision = Decision.model_validate(cmd.decision.model_dump())
            return [await self._decide(cmd, who, cmd.targets[0], decision)]
        targets = dict.fromkeys(cmd.targets)
        return list(await asyncio.gather(*(self._run_action(cmd, who, t) for t in targets)))

    def _replayed(self, row: CommandRow) -> CommandResult:
        plan = ActionPlan.model_validate(row.plan) if row.plan else None
        if row.status == "intent":  # the first copy of this command is still running
            return CommandResult(
                id=row.key, action=row.action, target=row.target, outcome="conflict",
                error="in_progress", plan=plan, replayed=True,
                detail="the same command (same key) is still in progress; ask again for its result",
            )
        return CommandResult(
            id=row.key, action=row.action, target=row.target,
            outcome=row.status,  # type: ignore[arg-type]
            error=row.error, detail=row.detail or "already executed under this key",
            plan=plan, replayed=True,
        )

    async def _run_action(self, cmd: Command, who: Principal, target: str) -> CommandResult:
        action = cmd.action
        base: dict[str, Any] = {"id": cmd.id, "action": action.value, "target": target}
        row = None if cmd.dry_run else self.journal.command(cmd.id, target)
        if row is not None and not self._redrive(row):
            return self._replayed(row)
        run = self.hub.runs.get(target)
        if run is None:
            unknown = self._unknown(row, base)
            if unknown is not None:
                return unknown
            return self._audited(cmd, who, CommandResult(
                **base, outcome="failed", error="not_found", detail=f"no such run: {target}"))
        backend = self.backend_for(run)
        the_plan = self.plan_for(action, [target])
        if backend is None:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="failed", error="unreachable", plan=the_plan,
                detail=f"no adapter for {run.backend}:{run.context} in this gateway"))
        cap = backend.capabilities().actions.get(action)
        if cap is None or not cap.supported:
            meaning = cap.meaning if cap else f"{run.backend} has no {action.value}"
            return self._audited(cmd, who, CommandResult(
                **base, outcome="failed", error="unsupported", plan=the_plan, detail=meaning))
        conflict = action_conflict(action, run)
        if conflict:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="conflict", error="conflict", plan=the_plan, detail=conflict))
        refused = command_refusal(self._engine(), run_invocation(
            action.value, run, identity=who.identity, role=who.role.value, reason=cmd.reason))
        if refused:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="forbidden", error="forbidden", plan=the_plan, detail=refused))
        if cmd.dry_run:
            return CommandResult(**base, outcome="planned", plan=the_plan,
                                 detail="dry run: nothing was done")
        if row is None:  # else: an intent a crash left, re-driven under its key
            begun = self.journal.begin(Intent(
                key=cmd.id, target=target, action=action.value, identity=who.identity,
                role=who.role.value, reason=cmd.reason, plan=the_plan.contract()))
            if begun.row is not None:
                return self._replayed(begun.row)
        self._crash_point("after_intent")
        result = await self._call(cmd.id, target, run, backend, action, who, cmd.reason, the_plan)
        self._settle(who, cmd.reason, result)
        return result

    def _unknown(self, row: CommandRow | None, base: dict[str, Any]) -> CommandResult | None:
        """The answer for a target this gateway does not know when that may not be final:
        ``in_progress`` when its key already has an intent in the journal (a crash left it;
        it is re-driven once the backends are read), ``unreachable`` while some backend has
        not been read since start (nothing was done; retry with the same key). None: the
        target is unknown for good (``not_found``)."""
        if row is not None and row.status == "intent":
            return self._replayed(row)
        if self.unread:
            return CommandResult(
                **base, outcome="failed", error="unreachable",
                detail="the gateway is starting: backends not read yet "
                f"({', '.join(sorted(self.unread))}); nothing was done; retry with the same key")
        return None

    def _redrive(self, row: CommandRow) -> bool:
        """Whether a retry under a known key re-drives it: only an intent a crash left (not
        one this gateway is executing right now, nor one a live peer gateway owns)."""
        return (row.status == "intent" and (row.key, row.target) not in self._inflight
                and self.journal.adopt(row))

    async def _call(self, key: str, target: str, run: Run, backend: Backend, action: Action,
                    who: Principal, reason: str, the_plan: ActionPlan) -> CommandResult:
        """The backend call and what follows it, in flight (``_inflight``) until it returns:
        the caller settles with no await in between, so recovery never re-drives it."""
        self._inflight.add((key, target))
        try:
            return await self._call_backend(key, target, run, backend, action, who, reason,
                                            the_plan)
        finally:
            self._inflight.discard((key, target))

    async def _call_backend(self, key: str, target: str, run: Run, backend: Backend,
                            action: Action, who: Principal, reason: str,
                            the_plan: ActionPlan) -> CommandResult:
        base: dict[str, Any] = {"id": key, "action": action.value, "target": target,
                                "plan": the_plan}
        sent_at = self.hub.clock()
        try:
            outcome = await asyncio.wait_for(
                _backend_call(backend, action, run, reason=reason, identity=who.identity),
                BACKEND_CALL_TIMEOUT_S)
        except BackendError as exc:
            return CommandResult(**base, outcome=_ERROR_OUTCOME.get(exc.code, "failed"),
                                 error=exc.code, detail=exc.message)
        except TimeoutError:
            return CommandResult(**base, outcome="failed", error="unreachable",
                                 detail=f"{run.backend} did not answer in "
                                 f"{BACKEND_CALL_TIMEOUT_S:g}s")
        except Exception as exc:  # an adapter bug must not take the gateway down
            return CommandResult(**base, outcome="failed", error="internal",
                                 detail=f"{type(exc).__name__}: {exc}")
        if action in (Action.PAUSE, Action.CANCEL):
            released = {r.id for r in the_plan.resources_released}
            self.hub.expect_release(run.id, action.value, released, self.release_verify_s,
                                    since=sent_at)
        if action is Action.RESUME:  # whichever worker of the run's scope picks it up reports
            self.hub.unbind(run.id)
        await self._refresh_run(backend, run)
        return CommandResult(**base, outcome="applied", detail=outcome.detail)

    async def _refresh_run(self, backend: Backend, run: Run) -> None:
        try:
            fresh = await asyncio.wait_for(backend.get_run(run.native_id), 10)
        except (BackendError, TimeoutError):
            return
        self.hub.observe_runs([fresh])

    # ----------------------------------------------------------------------- decisions

    async def _decide(self, cmd: Command, who: Principal, target: str,
                      decision: Decision) -> CommandResult:
        base: dict[str, Any] = {"id": cmd.id, "action": decision.kind.value, "target": target}
        row = None if cmd.dry_run else self.journal.command(cmd.id, target)
        if row is not None and not self._redrive(row):
            return self._replayed(row)
        intr = self.hub.interrupts.get(target)
        if intr is None:
            unknown = self._unknown(row, base)
            if unknown is not None:
                return unknown
            return self._audited(cmd, who, CommandResult(
                **base, outcome="failed", error="not_found", detail=f"no such interrupt: {target}"))
        invalid = validation_error(intr, decision)
        if invalid:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="failed", error="invalid", detail=invalid))
        if intr.status != "pending":
            by = f" by {intr.decision.by} at {intr.decision.at:%H:%M:%S}" if intr.decision else ""
            return self._audited(cmd, who, CommandResult(
                **base, outcome="conflict", error="conflict",
                detail=f"interrupt is already {intr.status}{by}"))
        run = self.hub.runs.get(intr.run_id)
        backend = self.backend_for(run) if run else None
        if backend is None:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="failed", error="unreachable",
                detail=f"no adapter for the run of {target}"))
        engine = self._engine()
        rule = interrupt_rule(intr, engine)
        refused = role_refusal(rule, identity=who.identity, role=who.role) if rule else None
        refused = refused or command_refusal(engine, run_invocation(
            decision.kind.value, run, identity=who.identity, role=who.role.value,
            reason=cmd.reason, interrupt=intr))
        if refused:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="forbidden", error="forbidden", detail=refused))
        if cmd.dry_run:
            return CommandResult(**base, outcome="planned", detail="dry run: nothing was done")
        grant: AlsoWrite | None = None  # the last approval needed, written with the intent
        if rule is not None and rule.approvers > 1 and row is None and decision.kind in (
                DecisionKind.APPROVE, DecisionKind.EDIT):
            early = self._four_eyes(cmd, who, intr, decision, rule)
            if early is not None:
                return early
            grant = self.approvals.grant(
                target, who.identity, kind=decision.kind.value,
                args=approved_args(intr, decision.kind.value, decision.args), rule=rule.rule)
        if row is None:  # else: an intent a crash left, re-driven under its key
            intent = Intent(
                key=cmd.id, target=target, action=decision.kind.value, identity=who.identity,
                role=who.role.value, reason=cmd.reason, claim_kind=decision.kind.value,
                payload={"interrupt": intr.model_dump(mode="json"),
                         "decision": decision.model_dump(mode="json")})
            try:
                begun = self.journal.begin(intent, also=grant)
            except DuplicateRow:  # this approver's approval arrived through another gateway
                return self._audited(cmd, who, CommandResult(
                    **base, outcome="forbidden", error="forbidden",
                    detail=already_approved(rule, who.identity) if rule else "already approved"))
            if begun.row is not None:
                return self._replayed(begun.row)
            if begun.status == "conflict":
                claim = begun.claim
                by = f" by {claim.identity} at {claim.at:%H:%M:%S}" if claim else ""
                elsewhere = self._claimed_elsewhere(claim)
                if elsewhere:  # this gateway's view had not caught up with a peer's decision
                    return self._audited(cmd, who, CommandResult(
                        **base, outcome="conflict", error="interrupt_changed_elsewhere",
                        detail=f"interrupt was decided{by} through gateway {elsewhere}; "
                        "this gateway had not shown that yet"))
                return self._audited(cmd, who, CommandResult(
                    **base, outcome="conflict", error="conflict",
                    detail=f"interrupt is already being decided{by}"))
            if grant is not None:  # shown with the others; taken back if delivery fails
                self._show_approvals_now(target)
        self._crash_point("after_intent")
        result = await self._deliver(cmd.id, intr, decision, backend, who)
        withdraw = (self.approvals.withdrawal(target, who.identity)
                    if grant is not None and result.outcome != "applied" else None)
        self._settle(who, cmd.reason, result, claimed=True, also=withdraw)
        if withdraw is not None:
            self._show_approvals_now(target)
        return result

    def _claimed_elsewhere(self, claim: DecisionClaim | None) -> str:
        """The peer gateway (shared journal) whose command holds ``claim``; "" when it is
        this gateway's own or the journal is not shared."""
        if claim is None or self.journal.exclusive:
            return ""
        row = self.journal.command(claim.command_key, claim.interrupt_id)
        owner = row.owner if row is not None else ""
        return owner if owner and owner != self.journal.owner else ""

    def _four_eyes(self, cmd: Command, who: Principal, intr: Interrupt, decision: Decision,
                   rule: InterruptRule) -> CommandResult | None:
        """An approval under a rule with ``approvers >= 2``: refuse a repeat approver, record
        all but the last approval (outcome ``recorded``, nothing reaches the backend); None when
        this is the last one needed, which is then delivered through the decision claim.

        No await between reading the approvals and recording or claiming: two approvers
        arriving together are ordered by the event loop."""
        base: dict[str, Any] = {"id": cmd.id, "action": decision.kind.value, "target": intr.id}
        earlier = self.approvals.approvals(intr.id)
        if any(a.identity == who.identity for a in earlier):
            return self._audited(cmd, who, CommandResult(
                **base, outcome="forbidden", error="forbidden",
                detail=already_approved(rule, who.identity)))
        args = approved_args(intr, decision.kind.value, decision.args)
        differ = [a.identity for a in earlier if (a.args if a.args is not None else {}) != args]
        if differ:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="conflict", error="conflict",
                detail=f"{', '.join(differ)} approved other arguments; under rule {rule.rule} "
                "every approver must approve the same arguments (or reject)"))
        if len(earlier) + 1 >= rule.approvers:
            return None
        # counted again under the interrupt's lock in the journal: two approvers on two
        # gateways sharing it are ordered there, so one of them is the last (never both
        # recorded as "not the last")
        recorded = self.approvals.record_unless_last(
            intr.id, who.identity, needed=rule.approvers, kind=decision.kind.value, args=args,
            rule=rule.rule, command=lambda n: RecordedCommand(
                key=cmd.id, role=who.role.value, reason=cmd.reason,
                detail=recorded_text(rule, who.identity, n)))
        if recorded == "last":
            return None
        if recorded is None:
            return self._audited(cmd, who, CommandResult(
                **base, outcome="forbidden", error="forbidden",
                detail=already_approved(rule, who.identity)))
        self._show_approvals_now(intr.id)
        return self._audited(cmd, who, CommandResult(**base, outcome="recorded",
                                                     detail=recorded.detail))

    # ------------------------------------------------------------------------ governance

    def _engine(self) -> CommandPolicyEngine | None:
        return self.policy_engine() if self.policy_engine is not None else None

    def show_approvals(self, intr: Interrupt) -> Interrupt:
        """The hub's overlay: an interrupt under a rule shows the rule as the gateway applies it
        (the stricter of the agent's and the loaded policy's) and who approved it so far."""
        rule = interrupt_rule(intr, self._engine())
        if rule is None:
            return intr
        return with_approvals(intr, rule, [a.contract() for a in self.approvals.approvals(intr.id)])

    def refresh_approvals(self, interrupt_id: str) -> None:
        """A peer gateway recorded an approval of ``interrupt_id``: show it here too."""
        self._show_approvals_now(interrupt_id)

    def _show_approvals_now(self, interrupt_id: str) -> None:
        intr = self.hub.interrupts.get(interrupt_id)
        if intr is None:
            return
        shown = self.show_approvals(intr)
        if shown is not intr:
            self.hub.interrupts[interrupt_id] = shown
            self.hub.publish("interrupt", shown.contract())

    async def _deliver(self, key: str, intr: Interrupt, decision: Decision, backend: Backend,
                       who: Principal) -> CommandResult:
        base: dict[str, Any] = {"id": key, "action": decision.kind.value, "target": intr.id}
        self._inflight.add((key, intr.id))
        try:
            outcome = await asyncio.wait_for(
                backend.decide(intr, decision, idempotency_key=key, identity=who.identity),
                BACKEND_CALL_TIMEOUT_S)
        except BackendError as exc:
            return CommandResult(**base, outcome=_ERROR_OUTCOME.get(exc.code, "failed"),
                                 error=exc.code, detail=exc.message)
        except TimeoutError:
            return CommandResult(**base, outcome="failed", error="unreachable",
                                 detail=f"backend did not answer in {BACKEND_CALL_TIMEOUT_S:g}s")
        except Exception as exc:
            return CommandResult(**base, outcome="failed", error="internal",
                                 detail=f"{type(exc).__name__}: {exc}")
        finally:
            self._inflight.discard((key, intr.id))
        return CommandResult(**base, outcome="applied", detail=outcome.detail)

    # ------------------------------------------------------------------------ bookkeeping

    def _audited(self, cmd: Command, who: Principal, result: CommandResult) -> CommandResult:
        """A result reached without an intent of its own (a refusal, a recorded approval):
        audited only."""
        self._audit(who, result, cmd.reason)
        return result

    def _settle(self, who: Principal, reason: str, result: CommandResult, *,
                claimed: bool = False, also: AlsoWrite | None = None) -> None:
        """The journaled command's outcome, its decision claim and its audit entry, in one
        transaction; then what the hub shows."""
        entry = self._audit_entry(who, result, reason)
        claim = self.journal.settle(Settlement(
            key=result.id, target=result.target, outcome=result.outcome, detail=result.detail,
            error=result.error, audit=entry, claimed=claimed), also=also)
        if claimed and result.outcome == "applied" and claim is not None:
            self.hub.mark_decided(result.target, claim)
        self.hub.publish("audit", entry.contract())

    def _audit_entry(self, who: Principal, result: CommandResult, reason: str) -> AuditEntry:
        return AuditEntry(
            at=utcnow(), identity=who.identity, role=who.role.value, action=result.action,
            target=result.target, reason=reason, outcome=result.outcome,
            plan=result.plan.contract() if result.plan else None, command_id=result.id,
            detail=result.detail,
        )

    def _audit(self, who: Principal, result: CommandResult, reason: str) -> None:
        entry = self._audit_entry(who, result, reason)
        self.journal.audit(entry)
        self.hub.publish("audit", entry.contract())

    def _crash_point(self, name: str) -> None:
        """A named point where a test's fault hook may act (e.g. SIGKILL the gateway)."""
        if self.fault_hook is not None:
            self.fault_hook(name)

    # -------------------------------------------------------------------------- recovery

    async def recover(self) -> int:
        """Re-drive commands whose intent was journaled but whose outcome was not (a crash):
        this gateway's, and on a shared journal those of a peer that died (adopted).

        Returns how many are still unfinished (their backend was unreachable)."""
        left = 0
        for row in self.journal.unfinished():
            if (row.key, row.target) in self._inflight or not self.journal.adopt(row):
                continue  # executing here right now, or another gateway took it
            who = Principal(row.identity, Role(row.role))
            if "decision" in row.payload:
                done = await self._recover_decision(row, who)
            else:
                done = await self._recover_action(row, who)
            left += 0 if done else 1
        return left

    async def _recover_decision(self, row: CommandRow, who: Principal) -> bool:
        """The intent's claim is still in the journal (only ``settle`` drops a claim)."""
        intr = Interrupt.model_validate(row.payload["interrupt"])
        decision = Decision.model_validate(row.payload["decision"])
        run = self.hub.runs.get(intr.run_id)
        backend = self.backend_for(run) if run else self._backend_by_run_id(intr.run_id)
        if backend is None:
            return False
        result = await self._deliver(row.key, intr, decision, backend, who)
        if result.error == "unreachable":  # intent and claim stay for the next attempt
            return False
        result.detail = f"{result.detail} ({self._redriven(row)})".strip()
        self._settle(who, row.reason, result, claimed=True)
        return True

    async def _recover_action(self, row: CommandRow, who: Principal) -> bool:
        action = Action(row.action)
        backend = self._backend_by_run_id(row.target)
        if backend is None:
            return False
        native = row.target.split("/", 1)[1]
        try:
            run = await backend.get_run(native)
        except BackendError as exc:
            if exc.code == "unreachable":
                return False
            result = CommandResult(id=row.key, action=row.action, target=row.target,
                                   outcome="failed", error=exc.code, detail=exc.message)
            self._settle(who, row.reason, result)
            return True
        the_plan = ActionPlan.model_validate(row.plan) if row.plan else ActionPlan(
            action=action, targets=[row.target])
        if run.state in _IN_EFFECT.get(action, set()):
            result = CommandResult(id=row.key, action=row.action, target=row.target,
                                   outcome="applied", plan=the_plan,
                                   detail="already in effect (checked after a gateway restart)")
        else:
            result = await self._call(row.key, row.target, run, backend, action, who, row.reason,
                                      the_plan)
            result.detail = f"{result.detail} ({self._redriven(row)})".strip()
        self._settle(who, row.reason, result)
        return True

    def _redriven(self, row: CommandRow) -> str:
        """How the audit says who re-drove a command (``row`` as read before adoption)."""
        if not row.owner or row.owner == self.journal.owner:
            return "re-driven after a gateway restart"
        return f"re-driven by gateway {self.journal.owner} for gateway {row.owner}, which stopped"

    def _backend_by_run_id(self, run_id: str) -> Backend | None:
        head = run_id.split("/", 1)[0]
        return self.backends.get(head)


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


def validation_error(intr: Interrupt, decision: Decision) -> str | None:
    """Why the decision cannot be delivered to this interrupt, or None.

    Kind allowed and edited args against the schema: the one decision check
    (console/decision_check.py); then what the operator must give with a reject or respond.
    """
    problem = check_decision(intr, decision)
    if problem is None and decision.kind is DecisionKind.REJECT:
        if not (decision.feedback or "").strip():
            problem = DecisionProblem("feedback", "reject needs feedback text for the agent")
    if problem is None and decision.kind is DecisionKind.RESPOND:
        if decision.response in (None, ""):
            problem = DecisionProblem("response", "respond needs a response")
    return str(problem) if problem is not None else None
