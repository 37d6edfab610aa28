"""Executes operator commands: plan, journal the intent, call the backend, journal the outcome,
audit. Idempotent by the client's key; decisions are claimed per interrupt so a second decision
on the same interrupt (from any client, on any gateway sharing the journal) is a conflict, never
a second delivery.

The executor routes a command to its kind: run actions (run_actions.py) or decisions
(decision_commands.py); both keep their books in one place (command_book.py: replay, audit,
settle). It is fed by the gateway's connections and calls adapters and the hub; nothing in
the hub calls it back (four-eyes approvals reach the hub's interrupts through
approval_view.py, given to both at construction).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from backend_adapters.base import Backend
from console.gateway.agent_links import AgentLinks
from console.gateway.approval_store import ApprovalStore
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import Principal
from console.gateway.command_book import CommandBook
from console.gateway.command_policy import EngineProvider
from console.gateway.decision_commands import Decisions
from console.gateway.hub import Hub
from console.gateway.journal_store import JournalStore
from console.gateway.protocol import Command
from console.gateway.refusals import RefusalLedger
from console.gateway.release_commands import ReleaseCommands
from console.gateway.retry_commands import RetryCommands
from console.gateway.run_actions import RunActions
from console.model import Action, ActionPlan, CommandResult, Decision, Role, Run
from console.prices import PriceTable


class CommandExecutor:
    def __init__(
        self,
        hub: Hub,
        journal: JournalStore,
        backends: dict[str, Backend],
        *,
        approvals: ApprovalView | None = None,
        release_verify_s: float = 15.0,
        fault_hook: Callable[[str], None] | None = None,
        policy_engine: EngineProvider | None = None,
        refusals: RefusalLedger | None = None,
        unread: set[str] | None = None,
        release_programs: dict[str, list[str]] | None = None,
        agent_links: AgentLinks | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        """``approvals``: the view the hub shows interrupts through (the gateway gives both
        the same); without one, the journal's approvals under ``policy_engine``'s rules.
        ``release_programs`` and ``agent_links``: the two ways of ``irq release --force``
        (release_commands.py)."""
        self.hub = hub
        self.journal = journal
        self.backends = backends
        self.governance = approvals or ApprovalView(ApprovalStore(journal), policy_engine)
        self.book = CommandBook(hub, journal, refusals=refusals, unread=unread,
                                fault_hook=fault_hook)
        self.actions = RunActions(hub, self.book, backends, self.governance,
                                  release_verify_s=release_verify_s, prices=prices)
        self.decisions = Decisions(hub, self.book, backends, self.governance)
        self.retries = RetryCommands(hub, self.book, backends, self.governance, prices=prices)
        self.releases = ReleaseCommands(
            hub, self.book, backends, self.governance, release_programs or {},
            agent_links if agent_links is not None else AgentLinks(),
            verify_s=release_verify_s)

    @property
    def unread(self) -> set[str]:
        """Backends not read once since start (command_book.py): the gateway empties it."""
        return self.book.unread

    @property
    def fault_hook(self) -> Callable[[str], None] | None:
        return self.book.fault_hook

    @fault_hook.setter
    def fault_hook(self, hook: Callable[[str], None] | None) -> None:
        """The crash-safety tests' seam (tests/support/faulty_gateway.py)."""
        self.book.fault_hook = hook

    def backend_for(self, run: Run) -> Backend | None:
        return self.actions.backend_for(run)

    def plan_for(self, action: Action, targets: list[str]) -> ActionPlan:
        return self.actions.plan_for(action, targets)

    async def execute(self, cmd: Command, who: Principal) -> list[CommandResult]:
        if not who.role.at_least(Role.OPERATOR) and not cmd.dry_run:
            return self._forbidden(cmd, who)
        if cmd.action is Action.DECIDE:
            assert cmd.decision is not None
            decision = Decision.model_validate(cmd.decision.model_dump())
            return [await self.decisions.decide(cmd, who, cmd.targets[0], decision)]
        targets = dict.fromkeys(cmd.targets)
        if cmd.action is Action.RETRY:
            return list(await asyncio.gather(*(self.retries.run(cmd, who, t) for t in targets)))
        if cmd.action is Action.RELEASE:  # one run (protocol.py)
            return [await self.releases.run(cmd, who, cmd.targets[0])]
        return list(await asyncio.gather(*(self.actions.run(cmd, who, t) for t in targets)))

    def _forbidden(self, cmd: Command, who: Principal) -> list[CommandResult]:
        """A role below operator: every target refused, audited in summary when the gateway
        keeps a refusal ledger (a refusal flood is two rows, not N)."""
        results = [
            CommandResult(id=cmd.id, action=cmd.action.value, target=t, outcome="forbidden",
                          error="forbidden",
                          detail=f"role {who.role.value} cannot {cmd.action.value}; "
                          "operator or admin required")
            for t in cmd.targets
        ]
        refusals = self.book.refusals
        if refusals is not None:
            refusals.refuse(
                identity=who.identity, role=who.role.value, action=cmd.action.value,
                target=cmd.targets[0], code="forbidden", reason=cmd.reason,
                items=len(cmd.targets), command_id=cmd.id,
                detail=results[0].detail + (f" ({len(cmd.targets)} targets)"
                                            if len(cmd.targets) > 1 else ""))
        else:
            for r in results:
                self.book.audit(who, r, cmd.reason)
        return results

    def refresh_approvals(self, interrupt_id: str) -> None:
        """A peer gateway recorded an approval of ``interrupt_id``: show it here too."""
        self.hub.show_approvals(interrupt_id)

    async def recover(self) -> int:
        """Re-drive commands whose intent was journaled but whose outcome was not (a crash):
        this gateway's, and on a shared journal those of a peer that died (adopted).

        Returns how many are still unfinished (their backend was unreachable)."""
        left = 0
        for row in self.journal.unfinished():
            if (row.key, row.target) in self.book.inflight or not self.journal.adopt(row):
                continue  # executing here right now, or another gateway took it
            who = Principal(row.identity, Role(row.role))
            if "decision" in row.payload:
                done = await self.decisions.recover(row, who)
            elif row.action == Action.RETRY.value:
                done = await self.retries.recover(row, who)
            elif row.action == Action.RELEASE.value:
                done = await self.releases.recover(row, who)
            else:
                done = await self.actions.recover(row, who)
            left += 0 if done else 1
        return left
