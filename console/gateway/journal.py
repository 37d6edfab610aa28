"""The gateway's durable journal (SQLite): command intents and outcomes, decision claims,
pause records and the audit trail.

Write-ahead rule: the intent of a command is committed *before* the backend is called and the
outcome after. After a crash, rows still in ``intent`` are re-driven at start-up with the same
idempotency key, which the adapters pass to the backend, so a decision is neither lost nor
delivered twice. WAL mode with ``synchronous=NORMAL`` survives a killed process.

One gateway owns a journal at a time (an exclusive lock on ``<journal>.lock``, released by the
kernel when the process dies): otherwise two gateways would both re-drive each other's
unfinished intents.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.model import AuditEntry, utcnow

_SCHEMA = """
CREATE TABLE IF NOT EXISTS commands (
    key TEXT NOT NULL,
    target TEXT NOT NULL,
    action TEXT NOT NULL,
    identity TEXT NOT NULL,
    role TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL DEFAULT '{}',
    plan TEXT,
    status TEXT NOT NULL,            -- intent | applied | conflict | failed | forbidden
    error TEXT,
    detail TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (key, target)
);
CREATE INDEX IF NOT EXISTS commands_status ON commands(status);
CREATE TABLE IF NOT EXISTS decisions (
    interrupt_id TEXT PRIMARY KEY,
    command_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    identity TEXT NOT NULL,
    at TEXT NOT NULL,
    status TEXT NOT NULL              -- intent | applied
);
CREATE TABLE IF NOT EXISTS pauses (
    run_id TEXT PRIMARY KEY,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
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
);
CREATE INDEX IF NOT EXISTS audit_target ON audit(target);
"""


@dataclass
class CommandRow:
    key: str
    target: str
    action: str
    identity: str
    role: str
    reason: str
    payload: dict[str, Any]
    plan: dict[str, Any] | None
    status: str
    error: str | None
    detail: str
    created_at: datetime


@dataclass
class DecisionClaim:
    interrupt_id: str
    command_key: str
    kind: str
    identity: str
    at: datetime
    status: str


class JournalInUse(RuntimeError):
    """Another live gateway owns this journal."""


class Journal:
    """Thread-safe; every method is one short transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._owner = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._owner)
            raise JournalInUse(
                f"another gateway is running on {path} (use another IRQ_HOME or stop it)"
            ) from None
        self._lock = threading.Lock()
        _private_files(path)  # before SQLite creates anything: it copies the db's mode
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        os.close(self._owner)  # releases the ownership lock

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the journal's connection, for stores that share it
        (obligation_store.py): committed when the block ends, rolled back if it raises."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        with self._lock:
            self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute(sql, args)
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    # -------------------------------------------------------------------- commands

    def command(self, key: str, target: str) -> CommandRow | None:
        rows = self._rows("SELECT * FROM commands WHERE key=? AND target=?", (key, target))
        return _command_row(rows[0]) if rows else None

    def record_intent(
        self,
        *,
        key: str,
        target: str,
        action: str,
        identity: str,
        role: str,
        reason: str,
        payload: dict[str, Any],
        plan: dict[str, Any] | None,
    ) -> bool:
        """Write the intent; False when (key, target) already exists (a replayed command)."""
        try:
            self._exec(
                "INSERT INTO commands (key, target, action, identity, role, reason, payload, plan,"
                " status, created_at) VALUES (?,?,?,?,?,?,?,?, 'intent', ?)",
                (key, target, action, identity, role, reason, json.dumps(payload, default=str),
                 json.dumps(plan) if plan is not None else None, utcnow().isoformat()),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def record_outcome(
        self, key: str, target: str, status: str, *, detail: str = "", error: str | None = None
    ) -> None:
        self._exec(
            "UPDATE commands SET status=?, detail=?, error=?, finished_at=?"
            " WHERE key=? AND target=?",
            (status, detail, error, utcnow().isoformat(), key, target),
        )

    def unfinished(self) -> list[CommandRow]:
        rows = self._rows("SELECT * FROM commands WHERE status='intent' ORDER BY created_at")
        return [_command_row(r) for r in rows]

    # ------------------------------------------------------------------- decisions

    def claim_decision(self, interrupt_id: str, key: str, kind: str, identity: str) -> bool:
        """Claim the interrupt for this command; False when another command holds it."""
        try:
            self._exec(
                "INSERT INTO decisions (interrupt_id, command_key, kind, identity, at, status)"
                " VALUES (?,?,?,?,?, 'intent')",
                (interrupt_id, key, kind, identity, utcnow().isoformat()),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def decision(self, interrupt_id: str) -> DecisionClaim | None:
        rows = self._rows("SELECT * FROM decisions WHERE interrupt_id=?", (interrupt_id,))
        if not rows:
            return None
        d = rows[0]
        return DecisionClaim(
            interrupt_id=d["interrupt_id"], command_key=d["command_key"], kind=d["kind"],
            identity=d["identity"], at=datetime.fromisoformat(d["at"]), status=d["status"],
        )

    def settle_decision(self, interrupt_id: str, applied: bool) -> None:
        """Applied: keep the claim for good. Not applied: drop it so a retry may claim it."""
        if applied:
            self._exec(
                "UPDATE decisions SET status='applied' WHERE interrupt_id=?", (interrupt_id,)
            )
        else:
            self._exec("DELETE FROM decisions WHERE interrupt_id=?", (interrupt_id,))

    # ---------------------------------------------------------------------- pauses

    def is_paused(self, run_id: str) -> bool:
        return bool(self._rows("SELECT 1 AS one FROM pauses WHERE run_id=?", (run_id,)))

    def mark_paused(self, run_id: str, paused: bool) -> None:
        if paused:
            self._exec(
                "INSERT OR REPLACE INTO pauses (run_id, at) VALUES (?, ?)",
                (run_id, utcnow().isoformat()),
            )
        else:
            self._exec("DELETE FROM pauses WHERE run_id=?", (run_id,))

    # ----------------------------------------------------------------------- audit

    def audit(self, entry: AuditEntry) -> None:
        self._exec(
            "INSERT INTO audit (at, identity, role, action, target, reason, outcome, plan,"
            " command_id, detail) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (entry.at.isoformat(), entry.identity, entry.role, entry.action, entry.target,
             entry.reason, entry.outcome, json.dumps(entry.plan) if entry.plan else None,
             entry.command_id, entry.detail),
        )

    def audit_entries(
        self, *, limit: int = 100, target_prefix: str | None = None,
        since: datetime | None = None, until: datetime | None = None,
        identity: str | None = None, actions: Sequence[str] | None = None,
    ) -> list[AuditEntry]:
        """Newest first. ``since``/``until`` compare ``at`` as stored (UTC ISO text)."""
        where: list[str] = []
        args: list[Any] = []
        if target_prefix:
            where.append("substr(target, 1, ?) = ?")
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
        rows = self._rows(f"SELECT * FROM audit{clause} ORDER BY id DESC LIMIT ?",
                          (*args, limit))
        out = []
        for d in rows:
            out.append(
                AuditEntry(
                    at=datetime.fromisoformat(d["at"]), identity=d["identity"], role=d["role"],
                    action=d["action"], target=d["target"], reason=d["reason"],
                    outcome=d["outcome"], plan=json.loads(d["plan"]) if d["plan"] else None,
                    command_id=d["command_id"], detail=d["detail"],
                )
            )
        return out


def _private_files(path: Path) -> None:
    """The journal holds reasons, decision payloads and the audit: owner-only.

    The database file is created 0600 here (``os.open`` with that mode, so there is no moment
    when it is readable by others); SQLite creates ``-wal`` and ``-shm`` with the database
    file's mode. A journal left world-readable by an older version is tightened."""
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for name in (str(path), f"{path}-wal", f"{path}-shm", f"{path}.lock"):
        try:
            if os.stat(name).st_mode & 0o077:
                os.chmod(name, 0o600)
        except FileNotFoundError:
            continue


def _command_row(d: dict[str, Any]) -> CommandRow:
    return CommandRow(
        key=d["key"], target=d["target"], action=d["action"], identity=d["identity"],
        role=d["role"], reason=d["reason"], payload=json.loads(d["payload"] or "{}"),
        plan=json.loads(d["plan"]) if d["plan"] else None, status=d["status"], error=d["error"],
        detail=d["detail"], created_at=datetime.fromisoformat(d["created_at"]),
    )


class JournalPauseLedger:
    """backend_adapters.base.PauseLedger backed by the journal."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def is_paused(self, run_id: str) -> bool:
        return self._journal.is_paused(run_id)

    def mark_paused(self, run_id: str, paused: bool) -> None:
        self._journal.mark_paused(run_id, paused)
