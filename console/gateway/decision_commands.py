"""Decisions on interrupts: checked once (console/decision_check.py), claimed per interrupt in
the journal so a second decision on the same interrupt (from any client, on any gateway
sharing the journal) is a conflict, never a second delivery; four-eyes approvals recorded
until the last one needed, which is delivered through the claim."""

from __future__ import annotations

from typing import Any

from backend_adapters.base import Backend
from console.decision_check import check_decision
from console.gateway.approval_store import RecordedCommand
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import Principal
from console.gateway.command_book import Attempt, CommandBook
from console.gateway.command_policy import (
    InterruptRule,
    already_approved,
    approved_args,
    command_refusal,
    edit_refusal,
    interrupt_rule,
    recorded_text,
    role_refusal,
    run_invocation,
)
from console.gateway.hub import Hub
from console.gateway.journal_store import AlsoWrite, CommandRow, DecisionClaim, DuplicateRow, Intent
from console.gateway.protocol import Command
from console.gateway.run_actions import backend_for
from console.model import CommandResult, Decision, DecisionKind, Interrupt


class Decisions:
    def __init__(self, hub: Hub, book: CommandBook, backends: dict[str, Backend],
                 governance: ApprovalView) -> None:
        self.hub = hub
        self.book = book
        self.journal = book.journal
        self.backends = backends
        self.governance = governance
        self.approvals = governance.approvals  # four-eyes approvals, in the journal

    async def decide(self, cmd: Command, who: Principal, target: str,
                     decision: Decision) -> CommandResult:
        attempt = self.book.open(cmd, who, target, decision.kind.value)
        if isinstance(attempt, CommandResult):
            return attempt
        intr = self.hub.interrupts.get(target)
        if intr is None:
            return self.book.not_found(attempt, "interrupt")
        checked = self._refusal(attempt, intr, decision)
        if isinstance(checked, CommandResult):
            return checked
        backend, rule = checked
        if attempt.dry_run:
            return attempt.result("planned", detail="dry run: nothing was done")
        grant: AlsoWrite | None = None  # the last approval needed, written with the intent
        if rule is not None and rule.approvers > 1 and attempt.row is None and decision.kind in (
                DecisionKind.APPROVE, DecisionKind.EDIT):
            early = self._four_eyes(attempt, intr, decision, rule)
            if early is not None:
                return early
            grant = self.approvals.grant(
                target, who.identity, kind=decision.kind.value,
                args=approved_args(intr, decision.kind.value, decision.args), rule=rule.rule)
        if attempt.row is None:  # else: an intent a crash left, re-driven under its key
            refused = self._begin(attempt, intr, decision, rule, grant)
            if refused is not None:
                return refused
        self.book.crash_point("after_intent")
        result = await self._deliver(attempt, intr, decision, backend)
        withdraw = (self.approvals.withdrawal(target, who.identity)
                    if grant is not None and result.outcome != "applied" else None)
        self.book.settle(who, cmd.reason, result, claimed=True, also=withdraw)
        if withdraw is not None:
            self.hub.show_approvals(target)
        return result

    def _refusal(self, attempt: Attempt, intr: Interrupt, decision: Decision
                 ) -> CommandResult | tuple[Backend, InterruptRule | None]:
        """Why the decision is refused before any intent (audited); else the backend that
        delivers it and the four-eyes rule it falls under."""
        invalid = validation_error(intr, decision)
        if invalid:
            return self.book.refuse(attempt, "failed", "invalid", invalid)
        if intr.status != "pending":
            by = f" by {intr.decision.by} at {intr.decision.at:%H:%M:%S}" if intr.decision else ""
            return self.book.refuse(attempt, "conflict", "conflict",
                                    f"interrupt is already {intr.status}{by}")
        run = self.hub.run(intr.run_id)
        backend = backend_for(self.backends, run) if run else None
        if run is None or backend is None:
            return self.book.refuse(attempt, "failed", "unreachable",
                                    f"no adapter for the run of {attempt.target}")
        who = attempt.who
        engine = self.governance.engine()
        rule = interrupt_rule(intr, engine)
        refused = role_refusal(rule, identity=who.identity, role=who.role) if rule else None
        refused = refused or command_refusal(engine, run_invocation(
            decision.kind.value, run, identity=who.identity, role=who.role.value,
            reason=attempt.reason, interrupt=intr))
        for tool, args in edited_calls(intr, decision):
            refused = refused or edit_refusal(engine, tool, run, args, role=who.role.value)
        if refused:
            return self.book.refuse(attempt, "forbidden", "forbidden", refused)
        return backend, rule

    def _begin(self, attempt: Attempt, intr: Interrupt, decision: Decision,
               rule: InterruptRule | None, grant: AlsoWrite | None) -> CommandResult | None:
        """The intent and the decision claim (and the last approval, ``grant``) in one
        transaction; the result when this attempt may not deliver (None: go on)."""
        who = attempt.who
        intent = Intent(
            key=attempt.key, target=attempt.target, action=decision.kind.value,
            identity=who.identity, role=who.role.value, reason=attempt.reason,
            claim_kind=decision.kind.value,
            payload={"interrupt": intr.model_dump(mode="json"),
                     "decision": decision.model_dump(mode="json")})
        try:
            begun = self.journal.begin(intent, also=grant)
        except DuplicateRow:  # this approver's approval arrived through another gateway
            return self.book.refuse(
                attempt, "forbidden", "forbidden",
                already_approved(rule, who.identity) if rule else "already approved")
        if begun.row is not None:
            return self.book.replayed(begun.row)
        if begun.status == "conflict":
            claim = begun.claim
            by = f" by {claim.identity} at {claim.at:%H:%M:%S}" if claim else ""
            elsewhere = self._claimed_elsewhere(claim)
            if elsewhere:  # this gateway's view had not caught up with a peer's decision
                return self.book.refuse(
                    attempt, "conflict", "interrupt_changed_elsewhere",
                    f"interrupt was decided{by} through gateway {elsewhere}; "
                    "this gateway had not shown that yet")
            return self.book.refuse(attempt, "conflict", "conflict",
                                    f"interrupt is already being decided{by}")
        if grant is not None:  # shown with the others; taken back if delivery fails
            self.hub.show_approvals(attempt.target)
        return None

    def _claimed_elsewhere(self, claim: DecisionClaim | None) -> str:
        """The peer gateway (shared journal) whose command holds ``claim``; "" when it is
        this gateway's own or the journal is not shared."""
        if claim is None or self.journal.exclusive:
            return ""
        row = self.journal.command(claim.command_key, claim.interrupt_id)
        owner = row.owner if row is not None else ""
        return owner if owner and owner != self.journal.owner else ""

    def _four_eyes(self, attempt: Attempt, intr: Interrupt, decision: Decision,
                   rule: InterruptRule) -> CommandResult | None:
        """An approval under a rule with ``approvers >= 2``: refuse a repeat approver, record
        all but the last approval (outcome ``recorded``, nothing reaches the backend); None when
        this is the last one needed, which is then delivered through the decision claim.

        No await between reading the approvals and recording or claiming: two approvers
        arriving together are ordered by the event loop."""
        who = attempt.who
        earlier = self.approvals.approvals(intr.id)
        if any(a.identity == who.identity for a in earlier):
            return self.book.refuse(attempt, "forbidden", "forbidden",
                                    already_approved(rule, who.identity))
        args = approved_args(intr, decision.kind.value, decision.args)
        differ = [a.identity for a in earlier if (a.args if a.args is not None else {}) != args]
        if differ:
            return self.book.refuse(
                attempt, "conflict", "conflict",
                f"{', '.join(differ)} approved other arguments; under rule {rule.rule} "
                "every approver must approve the same arguments (or reject)")
        if len(earlier) + 1 >= rule.approvers:
            return None
        # counted again under the interrupt's lock in the journal: two approvers on two
        # gateways sharing it are ordered there, so one of them is the last (never both
        # recorded as "not the last")
        recorded = self.approvals.record_unless_last(
            intr.id, who.identity, needed=rule.approvers, kind=decision.kind.value, args=args,
            rule=rule.rule, command=lambda n: RecordedCommand(
                key=attempt.key, role=who.role.value, reason=attempt.reason,
                detail=recorded_text(rule, who.identity, n)))
        if recorded == "last":
            return None
        if recorded is None:
            return self.book.refuse(attempt, "forbidden", "forbidden",
                                    already_approved(rule, who.identity))
        self.hub.show_approvals(intr.id)
        return self.book.audited(attempt, attempt.result("recorded", detail=recorded.detail))

    async def _deliver(self, attempt: Attempt, intr: Interrupt, decision: Decision,
                       backend: Backend) -> CommandResult:
        with self.book.in_flight(attempt.key, intr.id):
            answer = await self.book.call(attempt, backend.decide(
                intr, decision, idempotency_key=attempt.key, identity=attempt.who.identity),
                "backend")
        if isinstance(answer, CommandResult):
            return answer
        return attempt.result("applied", detail=answer.detail)

    async def recover(self, row: CommandRow, who: Principal) -> bool:
        """Re-drive a decision whose intent a crash left; its claim is still in the journal
        (only ``settle`` drops a claim). False while its backend is unreachable."""
        intr = Interrupt.model_validate(row.payload["interrupt"])
        decision = Decision.model_validate(row.payload["decision"])
        run = self.hub.run(intr.run_id)
        backend = (backend_for(self.backends, run) if run
                   else self.backends.get(intr.run_id.split("/", 1)[0]))
        if backend is None:
            return False
        attempt = Attempt(row.key, decision.kind.value, intr.id, who, row.reason, row=row)
        result = await self._deliver(attempt, intr, decision, backend)
        if result.error == "unreachable":  # intent and claim stay for the next attempt
            return False
        result.detail = f"{result.detail} ({self.book.redriven(row)})".strip()
        self.book.settle(who, row.reason, result, claimed=True)
        return True


def edited_calls(intr: Interrupt, decision: Decision) -> list[tuple[str, dict[str, Any]]]:
    """Every edited call in a decision, as (tool, arguments): an edit's, or each per-call
    edit of a batched (middleware) interrupt; each is a new proposal the policy checks."""
    if decision.decisions:
        tools = [a.action for a in intr.actions]
        return [(tools[i] if i < len(tools) else intr.action, d.args or {})
                for i, d in enumerate(decision.decisions) if d.kind is DecisionKind.EDIT]
    return [(intr.action, decision.args or {})] if decision.kind is DecisionKind.EDIT else []


def validation_error(intr: Interrupt, decision: Decision) -> str | None:
    """Why the decision cannot be delivered to this interrupt, or None: the one decision
    check (console/decision_check.py), asked once per decision."""
    problem = check_decision(intr, decision)
    return str(problem) if problem is not None else None
