"""The gateway's durable journal on SQLite (the embedded default): command intents and
outcomes, decision claims, pause records and the audit trail (tables and transactions:
journal_sql.py; the contract: journal_store.py).

Write-ahead rule: the intent of a command is committed *before* the backend is called and the
outcome after. After a crash, rows still in ``intent`` are re-driven at start-up with the same
idempotency key, which the adapters pass to the backend, so a decision is neither lost nor
delivered twice. WAL mode with ``synchronous=NORMAL`` survives a killed process.

One gateway owns a journal at a time (an exclusive lock on ``<journal>.lock``, released by the
kernel when the process dies): otherwise two gateways would both re-drive each other's
unfinished intents. Several gateways share a PostgreSQL journal instead (postgres_journal.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from console.gateway.journal_sql import ADDED_COLUMNS, SCHEMA, SqlJournal
from console.gateway.journal_store import (
    CommandRow,
    DecisionClaim,
    Dialect,
    JournalInUse,
    JournalStore,
    duplicates_as,
)

__all__ = ["CommandRow", "DecisionClaim", "Journal", "JournalInUse", "JournalPauseLedger",
           "SqliteJournal"]


class _SqliteTx:
    dialect: Dialect = "sqlite"

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        with duplicates_as((sqlite3.IntegrityError,)):
            return self._db.execute(sql, tuple(args))

    def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> None:
        with duplicates_as((sqlite3.IntegrityError,)):
            self._db.executemany(sql, [tuple(a) for a in args])


class SqliteJournal(SqlJournal):
    """Thread-safe; every method is one short transaction (``BEGIN IMMEDIATE``)."""

    dialect: Dialect = "sqlite"
    exclusive = True

    def __init__(self, path: Path, *, owner: str = "") -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.display = str(path)
        self.owner = owner
        self._owner_fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._owner_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._owner_fd)
            raise JournalInUse(
                f"another gateway is running on {path} (use another IRQ_HOME or stop it)"
            ) from None
        self._lock = threading.Lock()
        _private_files(path)  # before SQLite creates anything: it copies the db's mode
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        with self.transaction() as tx:  # a journal from before these columns existed
            have = {r[1] for r in tx.execute("PRAGMA table_info(commands)").fetchall()}
            for name, spec in ADDED_COLUMNS:
                if have and name not in have:
                    tx.execute(f"ALTER TABLE commands ADD COLUMN {name} {spec}")
        self.create_tables(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        os.close(self._owner_fd)  # releases the ownership lock

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_SqliteTx]:
        """One transaction on the journal's connection: committed when the block ends,
        rolled back if it raises."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


#: the name the gateway and tests have always used for the SQLite journal
Journal = SqliteJournal


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


class JournalPauseLedger:
    """backend_adapters.base.PauseLedger backed by the journal."""

    def __init__(self, journal: JournalStore) -> None:
        self._journal = journal

    def is_paused(self, run_id: str) -> bool:
        return self._journal.is_paused(run_id)

    def mark_paused(self, run_id: str, paused: bool) -> None:
        self._journal.mark_paused(run_id, paused)

    def paused_since(self) -> dict[str, datetime]:
        """Run id -> when irq paused it (the ``held_too_long`` condition's clock)."""
        with self._journal.transaction() as tx:
            rows = tx.execute("SELECT run_id, at FROM pauses").fetchall()
        return {run_id: datetime.fromisoformat(at) for run_id, at in rows}
