"""Interrupts as operators see them under a four-eyes rule: the rule as the gateway applies
it (the stricter of the agent's and the loaded policy's) and who approved so far.

A read-only view of the journal's approvals (approval_store.py) and the loaded policy, given
to the hub's interrupt store at construction: the hub renders interrupts through it and never
calls the command executor. The executor writes approvals and then asks the hub to show the
interrupt anew (``Hub.show_approvals``).
"""

from __future__ import annotations

from console.gateway.approval_store import ApprovalStore
from console.gateway.command_policy import (
    CommandPolicyEngine,
    EngineProvider,
    interrupt_rule,
    with_approvals,
)
from console.model import Interrupt


class ApprovalView:
    def __init__(self, approvals: ApprovalStore, policy_engine: EngineProvider | None = None
                 ) -> None:
        self.approvals = approvals
        #: the loaded policy's engine, asked each time (a reload replaces it); None: no policy
        self.policy_engine = policy_engine

    def engine(self) -> CommandPolicyEngine | None:
        return self.policy_engine() if self.policy_engine is not None else None

    def show(self, intr: Interrupt) -> Interrupt:
        """``intr`` with its rule and approvals as they stand (itself when under no rule)."""
        rule = interrupt_rule(intr, self.engine())
        if rule is None:
            return intr
        return with_approvals(intr, rule, [a.contract() for a in self.approvals.approvals(intr.id)])
