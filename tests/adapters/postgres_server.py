"""A private, throw-away PostgreSQL server for tests (Debian postgresql 15 binaries).

``initdb`` into a fresh directory, ``postgres -D DIR -p PORT -k DIR`` on a free loopback port
(trust authentication, superuser ``postgres``, fsync off), wait until it accepts connections,
create the test database; at the end a fast shutdown of the postmaster by its own pid.

PostgreSQL refuses to run as root: as root the binaries run as the unprivileged ``postgres``
user through ``setpriv`` (which execs, so the child's pid *is* the postmaster's) and the
directory belongs to that user. Missing binaries or a missing user are a test failure, not a
skip: CI machines run the same image, so a skip would hide a broken environment.

Use it from a test module with ``from postgres_server import postgres_server  # noqa: F401``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.processes import free_port

PG_BIN = Path(os.environ.get("IRQ_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "postgres"  # the OS user the server runs as (as root) and the database superuser
DATABASE = "irq_dbos"
START_TIMEOUT_S = 20.0

FAST = {  # a disposable cluster: durability off, small footprint
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_connections": "200",  # DBOS pools: worker, agent metadata client, adapter, tests
    "shared_buffers": "32MB",
    "autovacuum": "off",
    "logging_collector": "off",
    "log_min_messages": "warning",
}


@dataclass
class PostgresServer:
    host: str
    port: int
    user: str
    database: str
    data_dir: Path
    pid: int

    def url(self, database: str | None = None, scheme: str = "postgresql") -> str:
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{database or self.database}"

    def connect(self, database: str | None = None, **kwargs):  # -> psycopg.Connection
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            dbname=database or self.database,
            connect_timeout=5,
            **kwargs,
        )


def _requirements() -> list[str]:
    """The command prefix that runs a server binary as an unprivileged user (or fail)."""
    missing = [name for name in ("initdb", "postgres") if not (PG_BIN / name).is_file()]
    if missing:
        pytest.fail(
            f"PostgreSQL server binaries missing: {', '.join(missing)} not in {PG_BIN} "
            "(install postgresql-15 in the test image, or set IRQ_TEST_PG_BIN)",
            pytrace=False,
        )
    if os.geteuid() != 0:
        return []  # already unprivileged: run the binaries directly
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        pytest.fail(
            f"running as root and no {PG_USER!r} user to run PostgreSQL as "
            "(postgres refuses root; the postgresql package creates this user)",
            pytrace=False,
        )
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root and no setpriv to drop privileges for postgres", pytrace=False)
    return [setpriv, f"--reuid={PG_USER}", f"--regid={PG_USER}", "--init-groups", "--"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown (SIGINT) of the postmaster by its pid; immediate (SIGQUIT), then SIGKILL."""
    for sig, wait_s in ((signal.SIGINT, 10.0), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        os.kill(process.pid, sig)
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _start(prefix: list[str], data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start the postmaster on a free port (a few tries: another process may take the port)."""
    import psycopg

    for _attempt in range(3):
        port = free_port()
        options = [f"-c{k}={v}" for k, v in FAST.items()]
        cmd = [*prefix, str(PG_BIN / "postgres"), "-D", str(data_dir), "-p", str(port),
               "-k", str(data_dir.parent), *options]  # fmt: skip
        with log.open("ab") as out:
            process = subprocess.Popen(
                cmd, cwd=data_dir.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            try:
                psycopg.connect(
                    host="127.0.0.1", port=port, user=PG_USER, dbname="postgres", connect_timeout=1
                ).close()
                return process, port
            except psycopg.OperationalError:
                time.sleep(0.05)
        _stop(process)
        if "Address already in use" not in _tail(log):
            break
    pytest.fail(f"PostgreSQL did not start in {data_dir}:\n{_tail(log)}", pytrace=False)


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    """A private PostgreSQL server with an empty database ``irq_dbos`` (module scope)."""
    prefix = _requirements()
    # not under pytest's tmp dir: that one is private to root (mode 0700), postgres can't enter
    root = Path(tempfile.mkdtemp(prefix="irq-pg-"))
    data_dir = root / "data"
    log = root / "postgres.log"
    process: subprocess.Popen[bytes] | None = None
    try:
        if prefix:
            entry = pwd.getpwnam(PG_USER)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        init = subprocess.run(
            [*prefix, str(PG_BIN / "initdb"), "-D", str(data_dir), "-U", PG_USER,
             "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            cwd=root, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )  # fmt: skip
        if init.returncode != 0:
            output = (init.stdout + init.stderr).decode(errors="replace")
            pytest.fail(f"initdb failed ({init.returncode}):\n{output}", pytrace=False)
        process, port = _start(prefix, data_dir, log)
        server = PostgresServer("127.0.0.1", port, PG_USER, DATABASE, data_dir, process.pid)
        with server.connect("postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        yield server
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)
