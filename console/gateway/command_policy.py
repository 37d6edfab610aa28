"""Operator governance: the loaded policy's ``on = "command"`` rules and the rule an interrupt
was raised under, checked before an action or a decision reaches a backend.

- Command rules: every pause/resume/cancel/terminate and every decision is evaluated as an
  ``Invocation(on="command")`` (who, role, reason, the run's resources, the interrupt). A
  ``prohibit`` refuses it (outcome ``forbidden``, naming the rule and why it exists); a
  ``require_approval`` on a command refuses it unless the operator's role is at least the rule's
  ``decide_role`` (the operator *is* the approver; a command cannot wait for a second human).
- Interrupt rules (``Interrupt.policy``, raised by an agent's policy guard): only a role of at
  least ``decide_role`` may decide; with ``approvers >= 2`` (four eyes) approvals from that many
  distinct token identities are needed (approval_store.py). The agent's payload is not trusted to
  be strict: when the gateway's policy holds the same rule, the stricter of the two applies.

With no policy loaded nothing here refuses anything beyond the interrupt's own rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from console.model import Interrupt, InterruptPolicy, Role, Run, utcnow
from console.policy.model import Invocation, Policy, PolicyDecision


class CommandPolicyEngine(Protocol):
    """What this module needs of console.policy.engine.PolicyEngine."""

    @property
    def policy(self) -> Policy: ...

    def evaluate(self, inv: Invocation) -> PolicyDecision: ...


#: asked once per command: the engine of the policy loaded now, or None (no policy)
EngineProvider = Callable[[], CommandPolicyEngine | None]


def run_invocation(tool: str, run: Run | None, *, identity: str, role: str, reason: str,
                   interrupt: Interrupt | None = None) -> Invocation:
    """The command as the policy engine sees it: ``tool`` is the action or decision kind."""
    return Invocation(
        on="command", tool=tool, identity=identity, role=role, reason=reason,
        agent=run.name if run else "", backend=run.backend if run else "",
        context=run.context if run else "", run_id=run.id if run else "",
        resources=[r.contract() for r in run.resources] if run else [],
        interrupt=interrupt.model_dump(mode="json") if interrupt is not None else {},
        at=utcnow(),
    )


def command_refusal(engine: CommandPolicyEngine | None, inv: Invocation) -> str | None:
    """Why the policy forbids this command (the detail of a ``forbidden`` result), or None."""
    if engine is None:
        return None
    try:
        decision = engine.evaluate(inv)
    except Exception as exc:  # an engine bug must not let a governed command through
        return f"forbidden: the policy could not be evaluated ({type(exc).__name__}: {exc})"
    if decision.outcome == "prohibit":
        return f"forbidden by policy rule {_rule_text(engine.policy, decision.winner)}"
    if decision.outcome == "require_approval":
        approval = decision.approval
        needed = _role(approval.decide_role if approval else "admin")
        if _role(inv.role).at_least(needed):
            return None
        rule = approval.rule if approval else (decision.winner or "?")
        return (f"forbidden by policy rule {_rule_text(engine.policy, rule)} "
                f"({inv.tool} needs the approval of role {needed.value}; "
                f"{inv.identity} has role {inv.role})")
    return None


def edit_refusal(engine: CommandPolicyEngine | None, tool: str, run: Run,
                 args: dict[str, Any], *, role: str) -> str | None:
    """An edit is a new proposal: the edited call is checked against the policy as the
    agent's guard would check it at the tool (``on = "tool"``, the edited arguments), before
    anything runs. A ``prohibit`` refuses the edit; a ``require_approval`` is met by this very
    decision only when the operator's role is at least the rule's ``decide_role``."""
    if engine is None or not tool:
        return None
    inv = Invocation(
        on="tool", tool=tool, args=args, agent=run.name, backend=run.backend,
        context=run.context, run_id=run.id,
        resources=[r.contract() for r in run.resources], at=utcnow())
    try:
        decision = engine.evaluate(inv)
    except Exception as exc:  # an engine bug must not let an edited call through
        return f"forbidden: the edited call could not be checked ({type(exc).__name__}: {exc})"
    if decision.outcome == "prohibit":
        return (f"forbidden: the edited call {tool}({_args_text(args)}) is prohibited "
                f"by policy rule {_rule_text(engine.policy, decision.winner)}")
    if decision.outcome == "require_approval":
        approval = decision.approval
        needed = _role(approval.decide_role if approval else "admin")
        if not _role(role).at_least(needed):
            rule = approval.rule if approval else (decision.winner or "?")
            return (f"forbidden: the edited call needs the approval of role {needed.value} "
                    f"under policy rule {_rule_text(engine.policy, rule)}; you have role {role}")
    return None


def _args_text(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in list(args.items())[:6])


@dataclass(frozen=True)
class InterruptRule:
    """The rule an interrupt must be decided under (the stricter of agent's and gateway's)."""

    rule: str
    decide_role: Role
    approvers: int
    why: str


def interrupt_rule(intr: Interrupt, engine: CommandPolicyEngine | None) -> InterruptRule | None:
    policy = _interrupt_policy(intr)
    if policy is None:
        return None
    role, approvers, why = _role(policy.decide_role), max(1, policy.approvers), policy.why
    if engine is not None:
        loaded = next((r for r in engine.policy.rules if r.id == policy.rule), None)
        if loaded is not None and loaded.modality == "require_approval":
            if _role(loaded.decide_role).rank > role.rank:
                role = _role(loaded.decide_role)
            approvers = max(approvers, loaded.approvers)
            why = why or loaded.description
    return InterruptRule(rule=policy.rule, decide_role=role, approvers=approvers, why=why)


def role_refusal(rule: InterruptRule, *, identity: str, role: Role) -> str | None:
    if role.at_least(rule.decide_role):
        return None
    why = f": {rule.why}" if rule.why else ""
    return (f"forbidden by policy rule {rule.rule}{why} (deciding needs role "
            f"{rule.decide_role.value}; {identity} has role {role.value})")


def already_approved(rule: InterruptRule, identity: str) -> str:
    return f"{identity} already approved; rule {rule.rule} needs a different approver"


def recorded_text(rule: InterruptRule, identity: str, count: int) -> str:
    left = rule.approvers - count
    needs = "another approver" if left == 1 else f"{left} more approvers"
    return (f"approval {count} of {rule.approvers} recorded by {identity} under rule "
            f"{rule.rule}; needs {needs}")


def approved_args(intr: Interrupt, kind: str, args: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments an approval agrees to: the proposed ones, or an edit's."""
    return dict(args or {}) if kind == "edit" else dict(intr.args)


def with_approvals(intr: Interrupt, rule: InterruptRule,
                   approvals: list[dict[str, Any]]) -> Interrupt:
    """The interrupt as operators see it: the role and approvers the gateway requires, and
    ``policy.approvals``, who approved and when."""
    policy = _interrupt_policy(intr)
    if policy is None:
        return intr
    shown = {"approvals": approvals, "approvers": rule.approvers,
             "decide_role": rule.decide_role.value, "why": rule.why}
    if all(getattr(policy, k) == v for k, v in shown.items()):
        return intr
    return intr.model_copy(update={"policy": policy.model_copy(update=shown)})


def _interrupt_policy(intr: Interrupt) -> InterruptPolicy | None:
    value = getattr(intr, "policy", None)
    return value if isinstance(value, InterruptPolicy) else None


def _role(name: str) -> Role:
    """A rule's role; an unknown name is read as admin (fail closed: the payload is untrusted)."""
    try:
        role = Role(name)
    except ValueError:
        return Role.ADMIN
    return role if role.at_least(Role.OPERATOR) or name == "viewer" else Role.ADMIN


def _rule_text(policy: Policy, rule_id: str | None) -> str:
    rule = next((r for r in policy.rules if r.id == rule_id), None)
    if rule is None or not rule.description:
        return rule_id or "(default)"
    return f"{rule_id}: {rule.description}"
