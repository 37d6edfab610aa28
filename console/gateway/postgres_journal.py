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
- the schema is created idempotently under an advisory lock, so gateways may start together.

One connection per gateway, used under a lock (every call is one short transaction, as on
SQLite); a broken connection is opened again on the next call. The URL's password never
reaches a log line or an error message (:func:`~console.gateway.journal_store.redacted`).
"""

from __future__ import annotations

import contextlib
import threading
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
        self.create_tables([*SCHEMA, *(  # and a journal from before these columns existed
            f"ALTER TABLE commands ADD COLUMN IF NOT EXISTS {name} {spec}"
            for name, spec in ADDED_COLUMNS)])

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
            with self._conn.transaction():
                yield _PostgresTx(self._conn)

    def now(self, tx: JournalTx) -> float:
        """The database's clock: gateways on machines whose clocks differ agree on liveness."""
        return float(tx.execute("SELECT extract(epoch from clock_timestamp())").fetchone()[0])

    def create_tables(self, statements: Sequence[str]) -> None:
        types = column_types(self.dialect)
        with self.transaction() as tx:  # two gateways starting together: one at a time
            tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for statement in statements:
                tx.execute(statement.format(**types))


def _placeholders(sql: str) -> str:
    """``?`` (the journal's SQL) to psycopg's ``%s``; a literal ``%`` stays literal."""
    return sql.replace("%", "%%").replace("?", "%s")


def _without_password(exc: BaseException, url: str) -> str:
    text = str(exc).strip()
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text
