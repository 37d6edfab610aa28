"""A gateway starting on a PostgreSQL journal that a running peer is writing does not lock the
peer's tables: the schema that already exists is left alone (no ``ALTER TABLE``, no ``CREATE
INDEX``), so start-up neither waits for the peer's open transaction nor deadlocks with it.

Real PostgreSQL (tests/adapters/postgres_server.py). The starting journal's connection has a
short ``lock_timeout``: a statement that waited for the peer's lock would fail with
``LockNotAvailable`` instead of hanging.
"""

from __future__ import annotations

from urllib.parse import quote

from console.gateway.journal_sql import ADDED_COLUMNS
from console.gateway.postgres_journal import PostgresJournal
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture

DATABASE = "irq_schema"


def _url(server: PostgresServer, database: str, lock_timeout_ms: int = 500) -> str:
    return server.url(database) + "?options=" + quote(f"-c lock_timeout={lock_timeout_ms}")


def _fresh(server: PostgresServer, name: str) -> str:
    with server.connect("postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return name


def _columns(server: PostgresServer, database: str) -> set[str]:
    with server.connect(database, autocommit=True) as conn:
        return {row[0] for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name='commands'")}


def test_start_up_beside_an_open_insert_neither_blocks_nor_deadlocks(
        postgres_server: PostgresServer) -> None:
    database = _fresh(postgres_server, DATABASE)
    PostgresJournal(_url(postgres_server, database)).close()  # the first gateway made the schema
    with postgres_server.connect(database) as peer:  # a peer mid-command: its insert not committed
        peer.execute("INSERT INTO commands (key, target, action, identity, role, status,"
                     " created_at) VALUES ('k1', 'run-1', 'approve', 'op', 'operator',"
                     " 'intent', '2026-12-02T00:00:00Z')")
        peer.execute("INSERT INTO decisions VALUES ('int-1', 'k1', 'approve', 'op',"
                     " '2026-12-02T00:00:00Z', 'intent')")
        # a statement that waited for the peer's lock would raise LockNotAvailable after
        # lock_timeout (500 ms): starting at all is the proof it did not wait
        journal = PostgresJournal(_url(postgres_server, database))  # raised LockNotAvailable before
        assert journal.command("k1", "run-1") is None  # the peer's row is not committed yet
        peer.commit()
        row = journal.command("k1", "run-1")
        assert row is not None and row.status == "intent"
        journal.close()


def test_a_journal_from_before_the_added_columns_gets_them(postgres_server: PostgresServer) -> None:
    database = _fresh(postgres_server, DATABASE + "_old")
    PostgresJournal(_url(postgres_server, database)).close()
    with postgres_server.connect(database, autocommit=True) as conn:
        for name, _spec in ADDED_COLUMNS:
            conn.execute(f"ALTER TABLE commands DROP COLUMN {name}")
    assert not {name for name, _ in ADDED_COLUMNS} & _columns(postgres_server, database)
    PostgresJournal(_url(postgres_server, database)).close()
    assert {name for name, _ in ADDED_COLUMNS} <= _columns(postgres_server, database)


def test_job_tables_from_before_the_added_columns_get_them(
        postgres_server: PostgresServer) -> None:
    from console.gateway.job_store import JobStore

    database = _fresh(postgres_server, DATABASE + "_jobs")
    journal = PostgresJournal(_url(postgres_server, database))
    JobStore(journal, "gw-a")
    journal.close()
    added = {("irq_jobs", "from_step"), ("irq_job_targets", "new_run_id")}
    with postgres_server.connect(database, autocommit=True) as conn:
        for table, column in added:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    journal = PostgresJournal(_url(postgres_server, database))
    JobStore(journal, "gw-b")  # a gateway of this version starts on the older journal
    journal.close()
    with postgres_server.connect(database, autocommit=True) as conn:
        have = {(str(t), str(c)) for t, c in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_name LIKE 'irq_job%'")}
    assert added <= have
