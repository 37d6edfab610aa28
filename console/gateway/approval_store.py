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
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.gateway.journal import Journal
from console.model import utcnow

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
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        with journal.transaction() as db:
            db.execute(_SCHEMA)
            #: interrupts with at least one approval: the hub asks about every four-eyes
            #: interrupt at every poll, and most have none (this gateway is the only writer)
            rows = db.execute("SELECT DISTINCT interrupt_id FROM approvals").fetchall()
        self._approved: set[str] = {r[0] for r in rows}

    def approvals(self, interrupt_id: str) -> list[ApprovalRow]:
        if interrupt_id not in self._approved:
            return []
        with self.journal.transaction() as db:
            cur = db.execute(
                "SELECT interrupt_id, identity, at, kind, args_json, rule, command_key"
                " FROM approvals WHERE interrupt_id=? ORDER BY at, identity", (interrupt_id,))
            rows = cur.fetchall()
        return [
            ApprovalRow(interrupt_id=r[0], identity=r[1], at=datetime.fromisoformat(r[2]),
                        kind=r[3], args=json.loads(r[4]) if r[4] else None, rule=r[5],
                        command_key=r[6])
            for r in rows
        ]

    def record(self, interrupt_id: str, identity: str, *, kind: str,
               args: dict[str, Any] | None, rule: str, command: RecordedCommand | None) -> bool:
        """Record ``identity``'s approval; False when it already approved this interrupt.

        With ``command``, the approver's command row (outcome ``recorded``) is written in the
        same transaction, so a crash leaves either both or neither."""
        now = utcnow().isoformat()
        try:
            with self.journal.transaction() as db:
                db.execute(
                    "INSERT INTO approvals (interrupt_id, identity, at, kind, args_json, rule,"
                    " command_key) VALUES (?,?,?,?,?,?,?)",
                    (interrupt_id, identity, now, kind,
                     json.dumps(args) if args is not None else None, rule,
                     command.key if command else ""))
                if command is not None:
                    db.execute(
                        "INSERT INTO commands (key, target, action, identity, role, reason,"
                        " payload, plan, status, detail, created_at, finished_at)"
                        " VALUES (?,?,?,?,?,?,?,NULL,'recorded',?,?,?)",
                        (command.key, interrupt_id, kind, identity, command.role,
                         command.reason, json.dumps({"approval": {"rule": rule}}),
                         command.detail, now, now))
        except sqlite3.IntegrityError:
            return False
        self._approved.add(interrupt_id)
        return True

    def forget(self, interrupt_id: str, identity: str) -> None:
        """Drop one approval (the final approver's, when its delivery failed)."""
        with self.journal.transaction() as db:
            db.execute("DELETE FROM approvals WHERE interrupt_id=? AND identity=?",
                       (interrupt_id, identity))
            left = db.execute("SELECT 1 FROM approvals WHERE interrupt_id=? LIMIT 1",
                              (interrupt_id,)).fetchone()
        if left is None:
            self._approved.discard(interrupt_id)
