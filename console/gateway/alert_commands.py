"""Operator commands on alerts: ``alert_ack`` (a person has it) and ``alert_silence`` (no
bell, no bar, no notification for a time; the alert stays and still clears by itself), and
the ``alerts`` query. Operator or admin; idempotent by the client's key (the same key returns
the recorded result, ``replayed: true``); audited; the command row is written with its
outcome in the same transaction as the change (alert_store.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from console.gateway.alert_frames import AlertCommand
from console.gateway.alert_store import AlertChange, AlertStore
from console.gateway.auth import Principal
from console.gateway.hub import Hub
from console.gateway.journal_store import CommandRow, JournalStore
from console.gateway.refusals import RefusalLedger
from console.model import AuditEntry, CommandResult, Role, utcnow


class AlertCommands:
    def __init__(self, hub: Hub, journal: JournalStore, store: AlertStore,
                 refusals: RefusalLedger) -> None:
        self.hub, self.journal, self.store, self.refusals = hub, journal, store, refusals

    def query(self, include_cleared: bool, limit: int) -> list[dict[str, Any]]:
        return [a.contract() for a in self.store.listing(include_cleared=include_cleared,
                                                         limit=limit)]

    async def execute(self, cmd: AlertCommand, who: Principal) -> list[CommandResult]:
        targets = list(dict.fromkeys(cmd.targets))
        if not who.role.at_least(Role.OPERATOR) and not cmd.dry_run:
            detail = f"role {who.role.value} cannot {cmd.action}; operator or admin required"
            self.refusals.refuse(identity=who.identity, role=who.role.value, action=cmd.action,
                                 target=targets[0], code="forbidden", reason=cmd.reason,
                                 items=len(targets), command_id=cmd.id, detail=detail)
            return [CommandResult(id=cmd.id, action=cmd.action, target=t, outcome="forbidden",
                                  error="forbidden", detail=detail) for t in targets]
        return [self._one(cmd, who, target) for target in targets]

    def _one(self, cmd: AlertCommand, who: Principal, target: str) -> CommandResult:
        base: dict[str, Any] = {"id": cmd.id, "action": cmd.action, "target": target}
        row = self.journal.command(cmd.id, target)
        if row is not None and not cmd.dry_run:
            return _replayed(row)
        now = utcnow()
        if cmd.dry_run:
            found = self.store.get(target)
            if found is None:
                return CommandResult(**base, outcome="failed", error="not_found",
                                     detail=f"no such alert: {target}")
            verb = "acknowledge" if cmd.action == "alert_ack" else "silence"
            return CommandResult(**base, outcome="planned",
                                 detail=f"dry run: would {verb} {target} (now {found.state})")
        command = {"key": cmd.id, "action": cmd.action, "identity": who.identity,
                   "role": who.role.value}
        change: AlertChange
        if cmd.action == "alert_ack":
            change = self.store.acknowledge(target, by=who.identity, reason=cmd.reason, at=now,
                                            command=command)
        else:
            until = now + timedelta(seconds=cmd.for_s or 0.0)
            change = self.store.silence(target, until, by=who.identity, reason=cmd.reason,
                                        at=now, command=command)
        if change.outcome == "applied" and change.alert is not None:
            self.hub.publish("alert", change.alert.contract())
        result = CommandResult(**base, outcome=change.outcome,  # type: ignore[arg-type]
                               error=change.error, detail=change.detail)
        entry = AuditEntry(at=now, identity=who.identity, role=who.role.value,
                           action=cmd.action, target=target, reason=cmd.reason,
                           outcome=result.outcome, command_id=cmd.id, detail=result.detail)
        self.journal.audit(entry)
        self.hub.publish("audit", entry.contract())
        return result


def _replayed(row: CommandRow) -> CommandResult:
    return CommandResult(id=row.key, action=row.action, target=row.target,
                         outcome=row.status,  # type: ignore[arg-type]
                         error=row.error, detail=row.detail or "already executed under this key",
                         replayed=True)
