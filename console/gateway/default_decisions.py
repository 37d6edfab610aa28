"""Default decisions: a ``require_approval`` rule with a ``deadline`` and a ``default_decision``
decides its own unanswered interrupts once the deadline passes.

Only the gateway's loaded policy says so: the rule is looked up by the id the interrupt was
raised under, and an agent's payload never makes the gateway decide anything (an interrupt
whose rule has no default just becomes overdue; the alert evaluator escalates it). The
decision goes through the one decision path (decision_commands.py: checks, journal intent
and decision claim first, the backend call, outcome and audit), under the identity
``policy:RULE_ID`` with the rule's id in the reason, so the audit trail and the interrupt's
decision both say it was the rule's default. Its idempotency key is derived from the
interrupt id: a restart, or a second gateway on the same PostgreSQL journal, finds the
journal's row under that key and replays it instead of deciding again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from console.gateway.auth import Principal
from console.gateway.command_policy import EngineProvider
from console.gateway.decision_commands import Decisions
from console.gateway.protocol import Command, DecisionBody
from console.model import Action, CommandResult, Decision, DecisionKind, Interrupt, Role
from console.policy.loader import rule_deadline_s
from console.policy.model import Rule

log = logging.getLogger("irq.gateway")

POLICY_IDENTITY_PREFIX = "policy:"


def default_decision_key(interrupt_id: str) -> str:
    """The idempotency key of an interrupt's default decision (the same on every gateway and
    after a restart; hashed because interrupt ids may exceed a key's 128 characters)."""
    return "policy-default-" + hashlib.sha256(interrupt_id.encode()).hexdigest()[:40]


def policy_identity(rule_id: str) -> str:
    return f"{POLICY_IDENTITY_PREFIX}{rule_id}"


def default_rule(intr: Interrupt, engine_rules: list[Rule]) -> Rule | None:
    """The loaded rule that decides ``intr`` by default, or None (no rule, or no default)."""
    if intr.policy is None:
        return None
    rule = next((r for r in engine_rules if r.id == intr.policy.rule), None)
    if (rule is None or rule.modality != "require_approval" or rule.default_decision is None
            or not rule.deadline):
        return None
    return rule


def default_due(intr: Interrupt, rule: Rule) -> datetime:
    """When the rule's deadline for ``intr`` passes (counted from the interrupt's creation)."""
    return intr.created_at + timedelta(seconds=rule_deadline_s(rule) or 0.0)


class DefaultDecisions:
    """Applies due default decisions; :meth:`tick` is called every second by the gateway."""

    def __init__(self, interrupts: Callable[[], list[Interrupt]], decisions: Decisions,
                 policy_engine: EngineProvider, clock: Callable[[], datetime]) -> None:
        """``interrupts``: the hub's pending interrupts as it shows them now; ``policy_engine``:
        the loaded policy's engine, asked each tick (a reload replaces it)."""
        self.interrupts = interrupts
        self.decisions = decisions
        self.policy_engine = policy_engine
        self.clock = clock
        #: interrupts this gateway already tried (a refusal is audited once, not each second)
        self._tried: set[str] = set()

    def due(self) -> list[tuple[Interrupt, Rule]]:
        engine = self.policy_engine()
        if engine is None:
            return []
        rules, now = engine.policy.rules, self.clock()
        found = []
        for intr in self.interrupts():
            if intr.status != "pending" or intr.id in self._tried:
                continue
            rule = default_rule(intr, rules)
            if rule is not None and now >= default_due(intr, rule):
                found.append((intr, rule))
        return found

    async def tick(self) -> list[CommandResult]:
        results = []
        for intr, rule in self.due():
            self._tried.add(intr.id)
            result = await self.apply(intr, rule)
            log.info("default decision of rule %s on %s: %s %s", rule.id, intr.id,
                     result.outcome, result.detail)
            if result.error == "unreachable":  # nothing was done: try again next tick
                self._tried.discard(intr.id)
            results.append(result)
        return results

    async def run(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.tick()
            except Exception:  # keep the loop alive: the next tick tries again
                log.exception("applying default decisions failed")

    async def apply(self, intr: Interrupt, rule: Rule) -> CommandResult:
        kind = DecisionKind(rule.default_decision or "reject")
        feedback = None
        if kind is DecisionKind.REJECT:
            feedback = rule.default_feedback or (
                f"no decision within {rule.deadline}: rejected by default under policy rule "
                f"{rule.id}")
        reason = (f"deadline {rule.deadline} passed: default decision ({kind.value}) of "
                  f"policy rule {rule.id}")
        cmd = Command(type="command", id=default_decision_key(intr.id), action=Action.DECIDE,
                      targets=[intr.id], reason=reason,
                      decision=DecisionBody(kind=kind, feedback=feedback))
        # the rule itself decides: an admin-strength principal (the rule's decide_role is met),
        # still subject to the command rules of the policy like any operator
        who = Principal(identity=policy_identity(rule.id), role=Role.ADMIN)
        return await self.decisions.decide(cmd, who, intr.id,
                                           Decision(kind=kind, feedback=feedback))
