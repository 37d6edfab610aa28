"""The ``postgres_server`` fixture: a private PostgreSQL server per test module, started by
``devtools/postgres_server.py`` (the start-up the benchmarks share).

A server that cannot start (no ``pgserver`` package, no user to run it as) is a test failure,
not a skip: a skip would hide a broken environment.

Use it from a test module with ``from postgres_server import postgres_server  # noqa: F401``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from devtools.postgres_server import (
    DATABASE,
    PostgresServer,
    PostgresUnavailable,
    private_postgres,
)

__all__ = ["PostgresServer", "postgres_server"]


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    """A private PostgreSQL server with an empty database ``irq_dbos`` (module scope)."""
    with ExitStack() as stack:
        try:
            server = stack.enter_context(private_postgres(DATABASE))
        except PostgresUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        yield server
