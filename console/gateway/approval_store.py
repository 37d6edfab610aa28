"""Four-eyes approvals, durable in the gateway journal (the ``approvals`` table).

An interrupt raised under a policy rule with ``approvers >= 2`` is delivered only when that many
distinct token identities approved it. Every approval but the last is recorded here (and, in the
same transaction, as the approver's command row with outcome ``recorded``, so a retry under the
same idempotency key replays that result); the last one goes through the journal's decision
claim like any decision, so it is delivered exactly once. The table lives on the journal's
SQLite connection: approvals survive a gateway restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from console.gateway.journal_store import AlsoWrite, DuplicateRow, JournalStore, JournalTx
from console.model import utcnow

#: first key of the two-key ``pg_advisory_xact_lock`` on an interrupt's approvals ("irqa")
APPROVAL_LOCK = 0x69727161

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    interrupt_id TEXT NOT NULL,
    identity TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,              -- approve | edit
    args_json TEXT,                  -- the arguments approved (the interrupt's, or the edit's)
    rule TEXT NOT NULL DEFAULT '',
    command_key TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (interrupt_id, identity)
);
"""


@dataclass(frozen=True)
class ApprovalRow:
    interrupt_id: str
    identity: str
    at: datetime
    kind: str
    args: dict[str, Any] | None
    rule: str
    command_key: str

    def contract(self) -> dict[str, Any]:
        """What operators see in ``interrupt.policy.approvals``."""
        return {"by": self.identity, "at": self.at.isoformat(), "kind": self.kind}


@dataclass(frozen=True)
class RecordedCommand:
    """The command row written with an approval (so its key replays ``recorded``)."""

    key: str
    role: str
    reason: str
    detail: str


class ApprovalStore:
    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal
        journal.create_tables([_SCHEMA])
        #: interrupts with at least one approval: the hub asks about every four-eyes
        #: interrupt at every poll, and most have none. Trusted only when this gateway is the
        #: journal's only writer; on a shared journal every question goes to the database.
        self._approved: set[str] = set()
        if journal.exclusive:
            with journal.transaction() as tx:
                rows = tx.execute("SELECT DISTINCT interrupt_id FROM approvals").fetchall()
            self._approved = {r[0] for r in rows}

    def approvals(self, interrupt_id: str) -> list[ApprovalRow]:
        if self.journal.exclusive and interrupt_id not in self._approved:
            return []
        with self.journal.transaction() as tx:
            rows = tx.execute(
                "SELECT interrupt_id, identity, at, kind, args_json, rule, command_key"
                " FROM approvals WHERE interrupt_id=? ORDER BY at, identity",
                (interrupt_id,)).fetchall()
        return [
            ApprovalRow(interrupt_id=r[0], identity=r[1], at=datetime.fromisoformat(r[2]),
                        kind=r[3], args=json.loads(r[4]) if r[4] else None, rule=r[5],
                        command_key=r[6])
            for r in rows
        ]

    def record_unless_last(self, interrupt_id: str, identity: str, *, needed: int, kind: str,
                           args: dict[str, Any] | None, rule: str,
                           command: Callable[[int], RecordedCommand]
                           ) -> RecordedCommand | Literal["last"] | None:
        """Record ``identity``'s approval with the approver's command row (outcome
        ``recorded``) in one transaction, so a crash leaves either both or neither -- unless
        this approval is the last one needed (``"last"``: nothing
        written; the caller grants it with the decision's intent). The approvals are counted
        and written in one transaction under a lock on the interrupt (on PostgreSQL an
        advisory lock, on SQLite the database's write lock), so of two approvers on two
        gateways exactly one is told it is the last. ``command(n)``: the command row for the
        n-th approval. None: ``identity`` already approved."""
        now = utcnow().isoformat()
        try:
            with self.journal.transaction() as tx:
                if tx.dialect == "postgresql":
                    tx.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))",
                               (APPROVAL_LOCK, interrupt_id))
                else:  # take the write lock now: the count below is then the latest
                    tx.execute("DELETE FROM approvals WHERE interrupt_id='' AND identity=''")
                rows = tx.execute("SELECT identity FROM approvals WHERE interrupt_id=?",
                                  (interrupt_id,)).fetchall()
                if any(r[0] == identity for r in rows):
                    return None
                if len(rows) + 1 >= needed:
                    return "last"
                recorded = command(len(rows) + 1)
                _insert(tx, interrupt_id, identity, kind, args, rule, recorded.key, now)
                _insert_command(tx, recorded, interrupt_id, kind, identity, rule, now)
        except DuplicateRow:
            return None
        self._approved.add(interrupt_id)
        return recorded

    def grant(self, interrupt_id: str, identity: str, *, kind: str,
              args: dict[str, Any] | None, rule: str) -> AlsoWrite:
        """The last approval needed, written with the decision's intent (journal ``begin``)."""
        self._approved.add(interrupt_id)  # at worst one needless query if begin writes nothing

        def write(tx: JournalTx) -> None:
            _insert(tx, interrupt_id, identity, kind, args, rule, "", utcnow().isoformat())

        return write

    def withdrawal(self, interrupt_id: str, identity: str) -> AlsoWrite:
        """Drop the final approver's approval with the failed outcome (journal ``settle``)."""

        def write(tx: JournalTx) -> None:
            tx.execute("DELETE FROM approvals WHERE interrupt_id=? AND identity=?",
                       (interrupt_id, identity))

        return write


def _insert(tx: JournalTx, interrupt_id: str, identity: str, kind: str,
            args: dict[str, Any] | None, rule: str, command_key: str, at: str) -> None:
    tx.execute(
        "INSERT INTO approvals (interrupt_id, identity, at, kind, args_json, rule, command_key)"
        " VALUES (?,?,?,?,?,?,?)",
        (interrupt_id, identity, at, kind, json.dumps(args) if args is not None else None, rule,
         command_key))


def _insert_command(tx: JournalTx, command: RecordedCommand, interrupt_id: str, kind: str,
                    identity: str, rule: str, at: str) -> None:
    """The approval's own command row, outcome ``recorded`` (it is done: nothing to send)."""
    tx.execute(
        "INSERT INTO commands (key, target, action, identity, role, reason,"
        " payload, plan, status, detail, created_at, finished_at)"
        " VALUES (?,?,?,?,?,?,?,NULL,'recorded',?,?,?)",
        (command.key, interrupt_id, kind, identity, command.role, command.reason,
         json.dumps({"approval": {"rule": rule}}), command.detail, at, at))
