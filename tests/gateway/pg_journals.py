"""Journals on a fresh database of the real PostgreSQL test server, one per "gateway" (its own
connection, as each ``irq serve`` has), for the tests of what gateways sharing one journal
must settle between them."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from console.gateway.journal_engines import open_journal
from console.gateway.journal_store import JournalStore
from tests.adapters.postgres_server import PostgresServer

_databases = itertools.count()
OpenJournal = Callable[[str], JournalStore]


def fresh_database(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the test server (the server lives per module)."""
    name = f"shared_{next(_databases)}"
    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.url(name)


@pytest.fixture
def pg_journal(postgres_server: PostgresServer) -> Iterator[OpenJournal]:
    url = fresh_database(postgres_server)
    opened: list[JournalStore] = []

    def open_one(owner: str) -> JournalStore:
        journal = open_journal(url, owner=owner)
        opened.append(journal)
        return journal

    yield open_one
    for journal in opened:
        journal.close()
