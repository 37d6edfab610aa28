"""The gateway journal on PostgreSQL (``irq serve --journal postgresql://…``): several gateways
share one database.

The tables and transactions are journal_sql.py's, the same as on SQLite. What PostgreSQL adds:

- decision claims are settled by the database: ``decisions.interrupt_id`` is a primary key and
  a claim is ``INSERT … ON CONFLICT DO NOTHING`` inside the transaction that writes the
  intent, so of two gateways deciding one interrupt exactly one writes an intent (and
  delivers); the other's ``begin`` sees the first one's claim and answers ``conflict``;
- each gateway re-drives only the intents it wrote (``commands.owner``), never a live peer's;
  each renews its liveness (``gateways.expires_at``, on the database's clock) every second,
  and the intents of one whose liveness lapsed (it died) are adopted by a peer: adoption is a
  compare-and-set on ``commands.attempt``, so exactly one gateway re-drives an intent;
- the schema is created idempotently under an advisory lock, so gateways may start together;
  an object that already exists is not touched (the catalog is read first): ``ALTER TABLE …
  ADD COLUMN IF NOT EXISTS`` or ``CREATE INDEX IF NOT EXISTS`` would lock a table a running
  peer is writing, even when there is nothing to do, and could deadlock with its transaction;
  a start-up that still meets a deadlock or a serialization failure is tried again.

One connection per gateway, used under a lock (every call is one short transaction, as on
SQLite); a broken connection is opened again on the next call. The URL's password never
reaches a log line or an error message (:func:`~console.gateway.journal_store.redacted`).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
import psycopg.errors

from console.gateway.journal_sql import ADDED_COLUMNS, SCHEMA, SqlJournal
from console.gateway.journal_store import (
    Dialect,
    JournalTx,
    JournalUnavailable,
    column_types,
    duplicates_as,
    redacted,
)

CONNECT_TIMEOUT_S = 10
#: ``pg_advisory_xact_lock`` key for creating tables (any constant: "irq" in ASCII)
SCHEMA_LOCK = 0x697271
#: start-up attempts at creating the schema when the database reports a deadlock or a
#: serialization failure (a peer's transaction crossed ours), with a growing pause between them
SCHEMA_ATTEMPTS = 5
SCHEMA_RETRY_PAUSE_S = 0.2
_RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
#: SQLSTATEs of a server that went away: admin_shutdown, crash_shutdown, cannot_connect_now
_SERVER_GONE = {"57P01", "57P02", "57P03"}
_CREATES = re.compile(r"^\s*CREATE\s+(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)


class _PostgresTx:
    dialect: Dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        with duplicates_as((psycopg.errors.UniqueViolation,)):
            return self._conn.execute(_placeholders(sql), tuple(args))

    def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> None:
        with duplicates_as((psycopg.errors.UniqueViolation,)):
            with self._conn.cursor() as cur:
                cur.executemany(_placeholders(sql), [tuple(a) for a in args])


class PostgresJournal(SqlJournal):
    dialect: Dialect = "postgresql"
    exclusive = False

    def __init__(self, url: str, *, owner: str = "") -> None:
        self.url = url
        self.display = redacted(url)
        self.owner = owner
        self._lock = threading.Lock()
        self._conn = self._connect()
        for attempt in range(1, SCHEMA_ATTEMPTS + 1):
            try:
                self.create_tables(SCHEMA)
                self.add_columns("commands", ADDED_COLUMNS)  # a journal from before them
                break
            except _RETRYABLE:
                if attempt == SCHEMA_ATTEMPTS:
                    raise
                time.sleep(SCHEMA_RETRY_PAUSE_S * attempt)

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                   application_name="irq-gateway")
        except psycopg.Error as exc:
            raise JournalUnavailable(
                f"cannot open the journal at {self.display}: {_without_password(exc, self.url)}"
            ) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_PostgresTx]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self._lock:
            if self._conn.closed or self._conn.broken:
                self._conn = self._connect()
            try:
                with self._conn.transaction():
                    yield _PostgresTx(self._conn)
            except psycopg.Error as exc:
                if not self._lost(exc):
                    raise
                with contextlib.suppress(Exception):  # opened again on the next call
                    self._conn.close()
                raise JournalUnavailable(
                    f"the journal at {self.display} is unavailable: "
                    f"{_without_password(exc, self.url)}") from None

    def _lost(self, exc: psycopg.Error) -> bool:
        """Whether ``exc`` means the database went away (its connection broke, the server
        shut down or cannot accept connections), not that a statement failed."""
        state = exc.sqlstate or ""
        return (self._conn.closed or self._conn.broken or state.startswith("08")
                or state in _SERVER_GONE
                or (isinstance(exc, psycopg.OperationalError) and not state))

    def now(self, tx: JournalTx) -> float:
        """The database's clock: gateways on machines whose clocks differ agree on liveness."""
        return float(tx.execute("SELECT extract(epoch from clock_timestamp())").fetchone()[0])

    def create_tables(self, statements: Sequence[str]) -> None:
        """The ``CREATE TABLE|INDEX IF NOT EXISTS`` statements whose object is missing, under
        the advisory lock; none (and no lock on any table) when every object exists."""
        types = column_types(self.dialect)
        if not self._missing(statements):
            return
        with self.transaction() as tx:  # two gateways starting together: one at a time
            tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for statement in self._missing(statements, tx):
                tx.execute(statement.format(**types))

    def add_columns(self, table: str, columns: Sequence[tuple[str, str]]) -> None:
        """``ALTER TABLE … ADD COLUMN`` for the columns ``information_schema`` says are
        missing, under the advisory lock; no ALTER (no ACCESS EXCLUSIVE lock) otherwise."""
        if not self._missing_columns(table, columns):
            return
        with self.transaction() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for name, spec in self._missing_columns(table, columns, tx):
                tx.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {spec}")

    def _missing(self, statements: Sequence[str], tx: JournalTx | None = None) -> list[str]:
        """The statements whose table or index does not exist yet (a statement that is not
        a ``CREATE … IF NOT EXISTS name`` is always kept)."""
        def missing(t: JournalTx) -> list[str]:
            kept = []
            for statement in statements:
                named = _CREATES.match(statement)
                if named is None or t.execute("SELECT to_regclass(?)",
                                              (named.group(1),)).fetchone()[0] is None:
                    kept.append(statement)
            return kept
        if tx is not None:
            return missing(tx)
        with self.transaction() as own:
            return missing(own)

    def _missing_columns(self, table: str, columns: Sequence[tuple[str, str]],
                         tx: JournalTx | None = None) -> list[tuple[str, str]]:
        def missing(t: JournalTx) -> list[tuple[str, str]]:
            present = {row[0] for row in t.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = ?", (table,)).fetchall()}
            return [(name, spec) for name, spec in columns if name not in present]
        if tx is not None:
            return missing(tx)
        with self.transaction() as own:
            return missing(own)


def _placeholders(sql: str) -> str:
    """``?`` (the journal's SQL) to psycopg's ``%s``; a literal ``%`` stays literal."""
    return sql.replace("%", "%%").replace("?", "%s")


def _without_password(exc: BaseException, url: str) -> str:
    text = str(exc).strip()
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text
