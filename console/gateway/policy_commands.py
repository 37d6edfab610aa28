"""Operator commands of the policy layer: ``policy_reload`` (admin), ``obligation_fulfil`` and
``obligation_waive`` (operator or admin; the command's ``reason`` is the note kept with the
obligation).

Like every command they are idempotent by the client's key (the same key again returns the
recorded result, ``replayed: true``, and changes nothing) and audited. They act on the
gateway's own state only, so the command row is written with its final outcome in the same
transaction as the change (obligation_store.py): there is no intent to re-drive after a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.gateway.auth import Principal
from console.gateway.hub import Hub
from console.gateway.journal_store import CommandRow, JournalStore
from console.gateway.obligation_store import ObligationStore, record_command
from console.gateway.policy_frames import PolicyCommand
from console.gateway.policy_state import PolicyState, ReloadResult
from console.gateway.refusals import RefusalLedger
from console.model import AuditEntry, CommandResult, Role, utcnow
from console.policy.model import ObligationState

_NEEDS = {"policy_reload": Role.ADMIN, "obligation_fulfil": Role.OPERATOR,
          "obligation_waive": Role.OPERATOR}


class PolicyCommands:
    def __init__(self, hub: Hub, journal: JournalStore, store: ObligationStore,
                 state: PolicyState,
                 reloaded: Callable[[ReloadResult], None],
                 refusals: RefusalLedger | None = None) -> None:
        self.hub, self.journal, self.store, self.state = hub, journal, store, state
        self.reloaded = reloaded  # tells agents and clients about a reload (the server's)
        self.refusals = refusals

    async def execute(self, cmd: PolicyCommand, who: Principal) -> list[CommandResult]:
        needs = _NEEDS[cmd.action]
        targets = list(dict.fromkeys(cmd.targets))
        if not who.role.at_least(needs) and not cmd.dry_run:
            results = [CommandResult(
                id=cmd.id, action=cmd.action, target=t, outcome="forbidden", error="forbidden",
                detail=f"role {who.role.value} cannot {cmd.action}; {needs.value}"
                + (" or admin" if needs is Role.OPERATOR else "") + " required")
                for t in targets]
            if self.refusals is not None:
                self.refusals.refuse(
                    identity=who.identity, role=who.role.value, action=cmd.action,
                    target=targets[0], code="forbidden", reason=cmd.reason,
                    items=len(targets), command_id=cmd.id, detail=results[0].detail)
            else:
                for result in results:
                    self._audit(who, result, cmd.reason)
            return results
        return [self._one(cmd, who, target) for target in targets]

    def _one(self, cmd: PolicyCommand, who: Principal, target: str) -> CommandResult:
        row = self.journal.command(cmd.id, target)
        if row is not None and not cmd.dry_run:
            return _replayed(row)
        if cmd.action == "policy_reload":
            result = self._reload(cmd, who)
        else:
            result = self._close(cmd, who, target)
        if not cmd.dry_run:
            self._audit(who, result, cmd.reason)
        return result

    def _reload(self, cmd: PolicyCommand, who: Principal) -> CommandResult:
        base: dict[str, Any] = {"id": cmd.id, "action": cmd.action, "target": "policy"}
        if self.state.path is None:
            result = CommandResult(**base, outcome="failed", error="not_found",
                                   detail="this gateway has no policy file (irq serve "
                                   "--policy FILE)")
        elif cmd.dry_run:
            return CommandResult(**base, outcome="planned",
                                 detail=f"dry run: would reload {self.state.path}")
        else:
            reload = self.state.reload(force=True)
            self.reloaded(reload)
            if reload.error is not None:
                result = CommandResult(**base, outcome="failed", error="invalid",
                                       detail=f"{reload.error}; policy {reload.version} kept")
            else:
                rules = self.state.summary()["rules"]
                result = CommandResult(**base, outcome="applied", detail=(
                    f"policy {reload.version} loaded from {self.state.path} ({rules} rules)"
                    if reload.changed else f"policy {reload.version} unchanged"))
        with self.journal.transaction() as db:
            record_command(db, key=cmd.id, target="policy", action=cmd.action,
                           identity=who.identity, role=who.role.value, reason=cmd.reason,
                           outcome=result.outcome, error=result.error, detail=result.detail,
                           at=utcnow())
        return result

    def _close(self, cmd: PolicyCommand, who: Principal, target: str) -> CommandResult:
        base: dict[str, Any] = {"id": cmd.id, "action": cmd.action, "target": target}
        state: ObligationState = "fulfilled" if cmd.action == "obligation_fulfil" else "waived"
        if cmd.dry_run:
            found = self.store.get(target)
            if found is None:
                return CommandResult(**base, outcome="failed", error="not_found",
                                     detail=f"no such obligation: {target}")
            return CommandResult(**base, outcome="planned", detail=(
                f"dry run: would mark {target} {state} (now {found.state})"))
        closing = self.store.close_by_operator(
            target, state, by=who.identity, note=cmd.reason, at=utcnow(),
            command={"key": cmd.id, "action": cmd.action, "identity": who.identity,
                     "role": who.role.value})
        if closing.outcome == "applied" and closing.obligation is not None:
            self.hub.publish("obligation", closing.obligation.model_dump(mode="json"))
        return CommandResult(**base, outcome=closing.outcome,  # type: ignore[arg-type]
                             error=closing.error, detail=closing.detail)

    def _audit(self, who: Principal, result: CommandResult, reason: str) -> None:
        entry = AuditEntry(at=utcnow(), identity=who.identity, role=who.role.value,
                           action=result.action, target=result.target, reason=reason,
                           outcome=result.outcome, command_id=result.id, detail=result.detail)
        self.journal.audit(entry)
        self.hub.publish("audit", entry.contract())


def _replayed(row: CommandRow) -> CommandResult:
    return CommandResult(id=row.key, action=row.action, target=row.target,
                         outcome=row.status,  # type: ignore[arg-type]
                         error=row.error, detail=row.detail or "already executed under this key",
                         replayed=True)
