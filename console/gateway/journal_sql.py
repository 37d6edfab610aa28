"""The journal's tables and transactions, written once for both engines (journal_store.py).

:class:`SqlJournal` implements :class:`~console.gateway.journal_store.JournalStore` on top of
one method a subclass supplies, :meth:`SqlJournal.transaction` (SQLite in journal.py,
PostgreSQL in postgres_journal.py). Every statement here uses ``?`` placeholders and the SQL
both engines accept; times are stored as UTC ISO text, so they compare the same in both.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from console.gateway.journal_store import (
    AlsoWrite,
    Begun,
    CommandRow,
    DecisionClaim,
    Dialect,
    Intent,
    JournalTx,
    Settlement,
    column_types,
)
from console.model import AuditEntry, utcnow

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS commands (
    key TEXT NOT NULL,
    target TEXT NOT NULL,
    action TEXT NOT NULL,
    identity TEXT NOT NULL,
    role TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL DEFAULT '{{}}',
    plan TEXT,
    status TEXT NOT NULL,            -- intent | applied | conflict | failed | forbidden | recorded
    error TEXT,
    detail TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    finished_at TEXT,
    owner TEXT NOT NULL DEFAULT '',  -- the gateway that wrote (or adopted) the intent
    attempt INTEGER NOT NULL DEFAULT 0,  -- bumped by each adoption for a re-drive
    new_run_id TEXT,                 -- a retry's outcome: the new run carrying the work
    PRIMARY KEY (key, target)
)""",
    "CREATE INDEX IF NOT EXISTS commands_status ON commands(status)",
    """CREATE TABLE IF NOT EXISTS decisions (
    interrupt_id TEXT PRIMARY KEY,    -- the claim: one command per interrupt
    command_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    identity TEXT NOT NULL,
    at TEXT NOT NULL,
    status TEXT NOT NULL              -- intent | applied
)""",
    """CREATE TABLE IF NOT EXISTS pauses (
    run_id TEXT PRIMARY KEY,
    at TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS audit (
    id {serial_key},
    at TEXT NOT NULL,
    identity TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    plan TEXT,
    command_id TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT ''
)""",
    "CREATE INDEX IF NOT EXISTS audit_target ON audit(target)",
    """CREATE TABLE IF NOT EXISTS gateways (
    owner TEXT PRIMARY KEY,           -- a gateway sharing the journal (--gateway-id)
    expires_at {float} NOT NULL       -- alive until then (epoch seconds, the database's clock)
)""",
)

#: columns added after the first release, for journals created before them
ADDED_COLUMNS = (("owner", "TEXT NOT NULL DEFAULT ''"), ("attempt", "INTEGER NOT NULL DEFAULT 0"),
                 ("new_run_id", "TEXT"))

_COMMAND_COLUMNS = ("key", "target", "action", "identity", "role", "reason", "payload", "plan",
                    "status", "error", "detail", "created_at", "owner", "attempt", "new_run_id")
_CLAIM_COLUMNS = ("interrupt_id", "command_key", "kind", "identity", "at", "status")
_AUDIT_COLUMNS = ("at", "identity", "role", "action", "target", "reason", "outcome", "plan",
                  "command_id", "detail")


class SqlJournal:
    """Every public method is one transaction (:meth:`transaction`, from the subclass)."""

    dialect: Dialect
    exclusive: bool
    display: str
    owner: str

    def transaction(self) -> contextlib.AbstractContextManager[JournalTx]:
        raise NotImplementedError

    def create_tables(self, statements: Sequence[str]) -> None:
        """Idempotent ``CREATE … IF NOT EXISTS`` statements with :func:`column_types`
        placeholders, in one transaction."""
        types = column_types(self.dialect)
        with self.transaction() as tx:
            for statement in statements:
                tx.execute(statement.format(**types))

    # ----------------------------------------------------------------- a command's life

    def begin(self, intent: Intent, *, also: AlsoWrite | None = None) -> Begun:
        try:
            with self.transaction() as tx:
                found = _command(tx, intent.key, intent.target)
                if found is not None:
                    return Begun("replay", row=found)
                now = utcnow().isoformat()
                if intent.claim_kind is not None:
                    cur = tx.execute(
                        "INSERT INTO decisions (interrupt_id, command_key, kind, identity, at,"
                        " status) VALUES (?,?,?,?,?, 'intent') ON CONFLICT (interrupt_id)"
                        " DO NOTHING",
                        (intent.target, intent.key, intent.claim_kind, intent.identity, now))
                    if cur.rowcount != 1:
                        claim = _claim(tx, intent.target)
                        if claim is None or claim.command_key != intent.key:
                            return Begun("conflict", claim=claim)
                cur = tx.execute(
                    "INSERT INTO commands (key, target, action, identity, role, reason, payload,"
                    " plan, status, created_at, owner) VALUES (?,?,?,?,?,?,?,?, 'intent', ?, ?)"
                    " ON CONFLICT (key, target) DO NOTHING",
                    (intent.key, intent.target, intent.action, intent.identity, intent.role,
                     intent.reason, json.dumps(intent.payload, default=str),
                     json.dumps(intent.plan) if intent.plan is not None else None, now,
                     self.owner))
                if cur.rowcount != 1:  # the same key, begun at this moment by another gateway
                    raise _Replayed()
                if also is not None:
                    also(tx)
        except _Replayed:
            row = self.command(intent.key, intent.target)
            assert row is not None
            return Begun("replay", row=row)
        return Begun("new")

    def settle(self, settlement: Settlement, *,
               also: AlsoWrite | None = None) -> DecisionClaim | None:
        s = settlement
        claim = None
        with self.transaction() as tx:
            tx.execute("UPDATE commands SET status=?, detail=?, error=?, finished_at=?,"
                       " new_run_id=? WHERE key=? AND target=?",
                       (s.outcome, s.detail, s.error, utcnow().isoformat(), s.new_run_id,
                        s.key, s.target))
            if s.claimed:
                if s.outcome == "applied":  # kept for good
                    tx.execute("UPDATE decisions SET status='applied' WHERE interrupt_id=? AND"
                               " command_key=?", (s.target, s.key))
                else:  # dropped, so a retry may claim the interrupt
                    tx.execute("DELETE FROM decisions WHERE interrupt_id=? AND command_key=?",
                               (s.target, s.key))
                claim = _claim(tx, s.target)
            _insert_audit(tx, s.audit)
            if also is not None:
                also(tx)
        return claim

    # -------------------------------------------------------------------------- reads

    def command(self, key: str, target: str) -> CommandRow | None:
        with self.transaction() as tx:
            return _command(tx, key, target)

    def unfinished(self) -> list[CommandRow]:
        sql = f"SELECT {', '.join(_COMMAND_COLUMNS)} FROM commands WHERE status='intent'"
        args: tuple[Any, ...] = ()
        with self.transaction() as tx:
            if not self.exclusive:  # shared: this gateway's intents and those of dead ones
                sql += (" AND (owner=? OR owner NOT IN (SELECT owner FROM gateways WHERE"
                        " expires_at > ?))")
                args = (self.owner, self.now(tx))
            rows = tx.execute(sql + " ORDER BY created_at", args).fetchall()
        return [_command_row(r) for r in rows]

    def adopt(self, row: CommandRow) -> bool:
        if self.exclusive:
            return True
        with self.transaction() as tx:
            cur = tx.execute(
                "UPDATE commands SET owner=?, attempt=attempt+1 WHERE key=? AND target=? AND"
                " status='intent' AND attempt=? AND (owner=? OR owner NOT IN (SELECT owner FROM"
                " gateways WHERE expires_at > ?))",
                (self.owner, row.key, row.target, row.attempt, self.owner, self.now(tx)))
            return cur.rowcount == 1

    def renew_liveness(self, ttl_s: float) -> None:
        with self.transaction() as tx:
            tx.execute("INSERT INTO gateways (owner, expires_at) VALUES (?, ?) ON CONFLICT"
                       " (owner) DO UPDATE SET expires_at=excluded.expires_at",
                       (self.owner, self.now(tx) + ttl_s))

    def retire(self) -> None:
        with self.transaction() as tx:
            tx.execute("DELETE FROM gateways WHERE owner=?", (self.owner,))

    def now(self, tx: JournalTx) -> float:
        """Epoch seconds for liveness (PostgreSQL: the database's clock, shared by all)."""
        return time.time()

    def decision(self, interrupt_id: str) -> DecisionClaim | None:
        with self.transaction() as tx:
            return _claim(tx, interrupt_id)

    # ------------------------------------------------------------------------- pauses

    def is_paused(self, run_id: str) -> bool:
        with self.transaction() as tx:
            return tx.execute("SELECT 1 FROM pauses WHERE run_id=?", (run_id,)).fetchone() \
                is not None

    def mark_paused(self, run_id: str, paused: bool) -> None:
        with self.transaction() as tx:
            if paused:
                tx.execute("INSERT INTO pauses (run_id, at) VALUES (?, ?) ON CONFLICT (run_id)"
                           " DO UPDATE SET at=excluded.at", (run_id, utcnow().isoformat()))
            else:
                tx.execute("DELETE FROM pauses WHERE run_id=?", (run_id,))

    # -------------------------------------------------------------------------- audit

    def audit(self, entry: AuditEntry) -> None:
        with self.transaction() as tx:
            _insert_audit(tx, entry)

    def audit_entries(
        self, *, limit: int = 100, target_prefix: str | None = None,
        since: datetime | None = None, until: datetime | None = None,
        identity: str | None = None, actions: Sequence[str] | None = None,
    ) -> list[AuditEntry]:
        """Newest first. ``since``/``until`` compare ``at`` as stored (UTC ISO text)."""
        where: list[str] = []
        args: list[Any] = []
        if target_prefix:
            where.append("substr(target, 1, CAST(? AS INTEGER)) = ?")
            args += [len(target_prefix), target_prefix]
        if since is not None:
            where.append("at >= ?")
            args.append(since.astimezone(UTC).isoformat())
        if until is not None:
            where.append("at < ?")
            args.append(until.astimezone(UTC).isoformat())
        if identity:
            where.append("identity = ?")
            args.append(identity)
        if actions:
            where.append(f"action IN ({','.join('?' * len(actions))})")
            args += list(actions)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        with self.transaction() as tx:
            rows = tx.execute(f"SELECT {', '.join(_AUDIT_COLUMNS)} FROM audit{clause}"
                              " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        out = []
        for row in rows:
            d = dict(zip(_AUDIT_COLUMNS, row, strict=True))
            out.append(AuditEntry(
                at=datetime.fromisoformat(d["at"]), identity=d["identity"], role=d["role"],
                action=d["action"], target=d["target"], reason=d["reason"],
                outcome=d["outcome"], plan=json.loads(d["plan"]) if d["plan"] else None,
                command_id=d["command_id"], detail=d["detail"]))
        return out


class _Replayed(Exception):
    """Rolls :meth:`SqlJournal.begin` back when its intent lost a race for the same key."""


def _command(tx: JournalTx, key: str, target: str) -> CommandRow | None:
    row = tx.execute(f"SELECT {', '.join(_COMMAND_COLUMNS)} FROM commands WHERE key=? AND"
                     " target=?", (key, target)).fetchone()
    return _command_row(row) if row is not None else None


def _command_row(row: Sequence[Any]) -> CommandRow:
    d = dict(zip(_COMMAND_COLUMNS, row, strict=True))
    return CommandRow(
        key=d["key"], target=d["target"], action=d["action"], identity=d["identity"],
        role=d["role"], reason=d["reason"], payload=json.loads(d["payload"] or "{}"),
        plan=json.loads(d["plan"]) if d["plan"] else None, status=d["status"], error=d["error"],
        detail=d["detail"], created_at=datetime.fromisoformat(d["created_at"]),
        owner=d["owner"] or "", attempt=int(d["attempt"] or 0), new_run_id=d["new_run_id"],
    )


def _claim(tx: JournalTx, interrupt_id: str) -> DecisionClaim | None:
    row = tx.execute(f"SELECT {', '.join(_CLAIM_COLUMNS)} FROM decisions WHERE interrupt_id=?",
                     (interrupt_id,)).fetchone()
    if row is None:
        return None
    d = dict(zip(_CLAIM_COLUMNS, row, strict=True))
    return DecisionClaim(interrupt_id=d["interrupt_id"], command_key=d["command_key"],
                         kind=d["kind"], identity=d["identity"],
                         at=datetime.fromisoformat(d["at"]), status=d["status"])


def _insert_audit(tx: JournalTx, entry: AuditEntry) -> None:
    tx.execute(
        f"INSERT INTO audit ({', '.join(_AUDIT_COLUMNS)}) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (entry.at.isoformat(), entry.identity, entry.role, entry.action, entry.target,
         entry.reason, entry.outcome, json.dumps(entry.plan) if entry.plan else None,
         entry.command_id, entry.detail))
