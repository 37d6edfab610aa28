"""A policy decision in prose (``irq policy explain``): who asked for what, the outcome, every
rule that matched, the conflicts, the winner and why, what is owed and what was waived.

Works from the decision's JSON contract alone (a decision the gateway sent back), plus the
invocation that was checked.
"""

from __future__ import annotations

from console.policy.model import Invocation, PolicyDecision

_OUTCOME_WORDS = {
    "permit": "permitted",
    "prohibit": "prohibited",
    "require_approval": "needs a human's approval",
}


def explain_text(decision: PolicyDecision, inv: Invocation) -> str:
    """Plain text, a few lines: readable on a terminal and in a log."""
    lines = [f"{_who(inv)} {_what(inv)}: {_OUTCOME_WORDS[decision.outcome]}."]
    if decision.matched:
        count = len(decision.matched)
        lines.append(f"{count} rule{'s' if count != 1 else ''} matched:")
        for rule in decision.matched:
            lines.append(
                f'  - {rule.modality} "{rule.id}" (priority {rule.priority}, specificity '
                f"{rule.specificity}): {rule.why}"
            )
    else:
        lines.append("No rule matched.")
    lines.extend(f"  - {line}" for line in decision.explanation if " did not match: " in line)
    for conflict in decision.conflicts:
        lines.append(f"Conflict: {conflict}.")
    if decision.winner is None:
        lines.append(
            "No permit, prohibit or require_approval rule matched, so the policy default "
            f"({decision.outcome}) applies."
        )
    else:
        reason = next(
            (line.split(": ", 1)[1] for line in decision.explanation
             if line.startswith("outcome ") and ": " in line),
            "",
        )
        description = next(
            (line.split(" — ", 1)[1] for line in decision.explanation
             if line.startswith("matched ") and f'"{decision.winner}"' in line and " — " in line),
            "",
        )
        sentence = f'Winner: "{decision.winner}"'
        if reason:
            sentence += f" ({reason})"
        if description:
            sentence += f". Why the rule exists: {description}"
        lines.append(sentence + ".")
    if decision.approval is not None:
        approval = decision.approval
        who = (f"{approval.approvers} different approvers" if approval.approvers > 1
               else "one approver")
        lines.append(
            f"Approval: {who} with role {approval.decide_role} or above may "
            f"{_or(approval.decisions)}."
        )
    for obligation in decision.obligations:
        deadline = f" within {_duration(obligation.within_s)}" if obligation.within_s else ""
        lines.append(f'Obligation (rule "{obligation.rule}"): {obligation.what}{deadline}.')
    for waiver in decision.waived:
        lines.append(
            f'Obligation of rule "{waiver.obligation_rule}" waived by the dispensation '
            f'"{waiver.by}".'
        )
    if decision.outcome == "prohibit":
        lines.extend(line for line in decision.explanation if line.startswith("no obligation"))
    lines.append(f"Policy version: {decision.policy_version or 'none'}.")
    return "\n".join(lines)


def _who(inv: Invocation) -> str:
    if inv.on == "command":
        who = f"operator {inv.identity}" if inv.identity else "an operator"
        return who + (f" (role {inv.role})" if inv.role else "")
    who = f"agent {inv.agent}" if inv.agent else "an agent"
    details = [f"team {inv.team}"] if inv.team else []
    if inv.backend:
        details.append(f"on {inv.backend}" + (f":{inv.context}" if inv.context else ""))
    return who + (f" ({', '.join(details)})" if details else "")


def _what(inv: Invocation) -> str:
    if inv.on == "command":
        target = f" on run {inv.run_id}" if inv.run_id else ""
        reason = f' with reason "{inv.reason}"' if inv.reason else " with no reason given"
        return f"running {inv.tool}{target}{reason}"
    data = f" over {', '.join(inv.data)}" if inv.data else ""
    return f"calling {inv.tool}{data}"


def _or(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} min ({int(seconds)} s)"
    return f"{int(seconds) if float(seconds).is_integer() else seconds} s"
