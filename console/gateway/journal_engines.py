"""Which journal a ``--journal`` value names, opened: PostgreSQL for a ``postgresql://`` URL,
else the SQLite file (the contract both keep: journal_store.py)."""

from __future__ import annotations

from pathlib import Path

from console.gateway.journal_store import JournalStore, JournalUnavailable, is_postgres_url


def open_journal(where: str | Path, *, owner: str = "") -> JournalStore:
    """A PostgreSQL journal for a ``postgresql://`` URL, else the SQLite file at ``where``."""
    if is_postgres_url(where):
        try:
            from console.gateway.postgres_journal import PostgresJournal
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith("psycopg"):
                raise
            raise JournalUnavailable(
                "a PostgreSQL journal needs psycopg: pip install 'irq[postgres]'") from None
        return PostgresJournal(str(where), owner=owner)
    from console.gateway.journal import SqliteJournal

    return SqliteJournal(Path(where), owner=owner)
