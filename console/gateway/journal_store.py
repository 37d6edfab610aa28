"""The gateway journal's contract, shaped by a command's life, and how to open one.

A command touches the journal twice:

- :meth:`JournalStore.begin` — ONE transaction: either the row already written under this
  idempotency key and target (a replay, returned as it is), or the new intent together with
  its decision claim (for a decision; a claim held by another command is a conflict and
  nothing is written). The intent is committed before the backend is called (write-ahead).
- :meth:`JournalStore.settle` — ONE transaction: the outcome, the decision claim's status
  (applied: kept for good; otherwise dropped so a retry may claim it) and the audit entry.

Besides: the unfinished intents a restarted gateway re-drives, the pause ledger, the audit
query, and :meth:`JournalStore.transaction` for the stores that keep their own tables in the
journal (approval_store.py, obligation_store.py). Their SQL is written once, in the subset
both engines speak: ``?`` placeholders, ``INSERT … ON CONFLICT … DO NOTHING|UPDATE``, and the
two column types that differ spelled through :func:`column_types`.

Implementations: SQLite (journal.py, the embedded default; one gateway per file) and
PostgreSQL (postgres_journal.py; several gateways share one database, decision claims are
settled by its unique constraint). journal_engines.py opens one from ``irq serve --journal``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

from console.model import AuditEntry

Dialect = Literal["sqlite", "postgresql"]


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
    status: str  # intent | applied | conflict | failed | forbidden | recorded
    error: str | None
    detail: str
    created_at: datetime
    owner: str = ""  # the gateway that wrote (or adopted) the intent and may re-drive it
    attempt: int = 0  # bumped by every re-drive that adopts the intent (compare-and-set)
    new_run_id: str | None = None  # a retry's outcome: the run that carries the work now


@dataclass
class DecisionClaim:
    interrupt_id: str
    command_key: str
    kind: str
    identity: str
    at: datetime
    status: str  # intent | applied


@dataclass(frozen=True)
class Intent:
    """What a command is about to do, written before the backend is called."""

    key: str
    target: str
    action: str
    identity: str
    role: str
    reason: str
    payload: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    #: a decision: claim ``target`` (an interrupt id) for this command, with this kind
    claim_kind: str | None = None


@dataclass(frozen=True)
class Begun:
    """What :meth:`JournalStore.begin` came to: exactly one of the three."""

    status: Literal["new", "replay", "conflict"]
    row: CommandRow | None = None  # replay: the row under this key and target
    claim: DecisionClaim | None = None  # conflict: the other command's claim (if still there)


@dataclass(frozen=True)
class Settlement:
    """A command's outcome; ``claimed``: the decision claim on ``target`` is settled with it."""

    key: str
    target: str
    outcome: str
    detail: str
    error: str | None
    audit: AuditEntry
    claimed: bool = False
    #: a retry that created a new run: kept so a replay under the same key names it too
    new_run_id: str | None = None


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class JournalTx(Protocol):
    """One open transaction: ``?`` placeholders on either engine."""

    dialect: Dialect

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> None: ...


#: a store's writes that belong to the same transaction as the journal's own
AlsoWrite = Callable[[JournalTx], None]


class DuplicateRow(Exception):
    """An insert hit a unique key (either engine); the transaction is rolled back."""


class JournalInUse(RuntimeError):
    """Another live gateway owns this (SQLite) journal."""


class JournalUnavailable(RuntimeError):
    """The journal's database cannot be reached or opened (message without credentials)."""


class JournalStore(Protocol):
    #: True when this gateway is the journal's only writer (SQLite): caches may trust memory
    exclusive: bool
    #: where the journal is, for logs and ``irq`` output (never with a password)
    display: str
    #: this gateway's name in ``commands.owner``: it re-drives only its own intents
    owner: str

    def close(self) -> None: ...

    def begin(self, intent: Intent, *, also: AlsoWrite | None = None) -> Begun:
        """Replay, or the new intent with its claim; ``also`` runs in the same transaction
        when the intent is new."""
        ...

    def settle(self, settlement: Settlement, *,
               also: AlsoWrite | None = None) -> DecisionClaim | None:
        """Outcome, claim and audit in one transaction; the claim as it now stands."""
        ...

    def command(self, key: str, target: str) -> CommandRow | None: ...

    def unfinished(self) -> list[CommandRow]:
        """Intents without an outcome this gateway may re-drive, oldest first: its own, and on
        a shared journal those of gateways whose liveness lapsed (they died)."""
        ...

    def adopt(self, row: CommandRow) -> bool:
        """Take ``row`` (an unfinished intent) for a re-drive: True for exactly one gateway,
        and only while the row is unchanged and its owner is this gateway or dead."""
        ...

    def renew_liveness(self, ttl_s: float) -> None:
        """This gateway is alive for ``ttl_s`` more seconds (peers adopt its intents after)."""
        ...

    def retire(self) -> None:
        """A clean stop: peers may adopt this gateway's intents at once."""
        ...

    def decision(self, interrupt_id: str) -> DecisionClaim | None: ...

    def is_paused(self, run_id: str) -> bool: ...

    def mark_paused(self, run_id: str, paused: bool) -> None: ...

    def audit(self, entry: AuditEntry) -> None: ...

    def audit_entries(
        self, *, limit: int = 100, target_prefix: str | None = None,
        since: datetime | None = None, until: datetime | None = None,
        identity: str | None = None, actions: Sequence[str] | None = None,
    ) -> list[AuditEntry]: ...

    def transaction(self) -> contextlib.AbstractContextManager[JournalTx]: ...

    def create_tables(self, statements: Sequence[str]) -> None:
        """Idempotent ``CREATE … IF NOT EXISTS`` statements (a store's own tables), with
        :func:`column_types` placeholders, in one transaction."""
        ...


def column_types(dialect: Dialect) -> dict[str, str]:
    """The column types the two engines spell differently, for ``str.format`` in schemas."""
    if dialect == "postgresql":
        return {"serial_key": "BIGSERIAL PRIMARY KEY", "float": "DOUBLE PRECISION"}
    return {"serial_key": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL"}


def is_postgres_url(where: str | Path) -> bool:
    return isinstance(where, str) and where.split("://", 1)[0] in ("postgresql", "postgres")


def redacted(url: str) -> str:
    """A database URL without its password (``postgresql://irq:***@db/irq``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@contextlib.contextmanager
def duplicates_as(error_types: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Turn an engine's unique-violation error into :class:`DuplicateRow`."""
    try:
        yield
    except error_types as exc:
        raise DuplicateRow(str(exc)) from exc
