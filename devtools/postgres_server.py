"""A private, throw-away PostgreSQL server for tests and benchmarks, from the binaries of the
``pgserver`` wheel.

The server comes from the project's own files: ``pgserver`` (a PyPI wheel that ships the
PostgreSQL 16 server binaries, pinned in the ``dev`` extra of pyproject.toml, installed by
``make test``). :func:`private_postgres` finds the binaries through that installed package
only, never at a system path or on PATH. Only the binaries are used: the package's Python
layer is not imported (it would create OS users and widen permissions up to ``/``).

``initdb`` into a fresh temporary directory, ``postgres -D DIR -p PORT -k DIR`` on a free
loopback port (trust authentication, superuser ``postgres``, fsync off), wait until it accepts
connections, create the test database; at the end a fast shutdown of the postmaster by its
own pid.

PostgreSQL refuses to run as root: as root the binaries run as the unprivileged ``nobody``
user (present on every Debian image; the child drops privileges itself before the exec, so
its pid *is* the postmaster's), from a copy inside the temporary directory (which belongs to
that user), so nothing outside that directory needs to be readable by it. A missing package or
user raises :class:`PostgresUnavailable`, which the tests' fixture
(``tests/adapters/postgres_server.py``) turns into a failure, not a skip: a skip would hide a
broken environment.

    with private_postgres("irq_dbos") as server:
        server.url(), server.connect()
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.processes import free_port

if TYPE_CHECKING:
    import psycopg

PACKAGE = "pgserver"  # the wheel whose pginstall/{bin,lib,share} hold the server
RUN_AS = "nobody"  # the OS user the server runs as when the tests run as root
PG_USER = "postgres"  # the database superuser
DATABASE = "irq_dbos"
START_TIMEOUT_S = 20.0


class PostgresUnavailable(RuntimeError):
    """The server cannot be started here: no ``pgserver`` package, no user to run it as, a
    failed ``initdb`` or a postmaster that never answered."""

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
    bin_dir: Path  # where the running postgres binary is (the package's, or a copy of it)

    def url(self, database: str | None = None, scheme: str = "postgresql") -> str:
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{database or self.database}"

    def connect(self, database: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            dbname=database or self.database,
            connect_timeout=5,
            **kwargs,
        )


def packaged_install() -> Path:
    """``pginstall`` of the installed ``pgserver`` package (located, not imported), or fail."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise PostgresUnavailable(
            f"the {PACKAGE!r} package (PostgreSQL server binaries) is not installed: "
            "run `make install` (it is in the dev extra of pyproject.toml)"
        )
    install = Path(locations[0]) / "pginstall"
    missing = [name for name in ("initdb", "postgres") if not (install / "bin" / name).is_file()]
    if missing:
        raise PostgresUnavailable(
            f"{PACKAGE} is installed but {', '.join(missing)} is missing from {install / 'bin'}"
        )
    return install


@dataclass(frozen=True)
class RunAs:
    """Who the server binaries run as: ``None`` fields mean "as ourselves"."""

    user: int | None = None
    group: int | None = None

    def popen_kwargs(self) -> dict[str, object]:
        if self.user is None:
            return {}
        return {"user": self.user, "group": self.group, "extra_groups": []}


def server_user() -> RunAs:
    """Who runs the server binaries: ourselves, or (as root) the unprivileged ``nobody``."""
    if os.geteuid() != 0:
        return RunAs()  # already unprivileged: run the binaries directly
    try:
        entry = pwd.getpwnam(RUN_AS)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root and no {RUN_AS!r} user to run PostgreSQL as (postgres refuses root)"
        ) from None
    return RunAs(entry.pw_uid, entry.pw_gid)


def bin_dir(install: Path, root: Path, run_as: RunAs) -> Path:
    """The binaries to run: the package's own, or (as root) a copy the server's user can read.

    The wheel's layout is kept: postgres finds its lib/ and share/ relative to its own
    executable, and the binaries find the shared libraries the wheel vendors in
    ``site-packages/pgserver.libs`` through an ``$ORIGIN``-relative rpath.
    """
    if run_as.user is None:
        return install / "bin"
    site = install.parent.parent  # site-packages
    copy = root / "site" / install.relative_to(site)
    for part in ("bin", "lib", "share"):
        shutil.copytree(install / part, copy / part, symlinks=True)
    vendored = site / f"{PACKAGE}.libs"
    if vendored.is_dir():
        shutil.copytree(vendored, root / "site" / vendored.name, symlinks=True)
    return copy / "bin"


def server_env() -> dict[str, str]:
    """The children's environment: no PATH lookups, no inherited PG* settings."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    keep["PATH"] = os.defpath
    keep["LC_ALL"] = "C"
    return keep


def stop_postmaster(process: subprocess.Popen[bytes]) -> None:
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


def _start(
    binaries: Path, run_as: RunAs, data_dir: Path, log: Path
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the postmaster on a free port (a few tries: another process may take the port)."""
    import psycopg

    for _attempt in range(3):
        port = free_port()
        options = [f"-c{k}={v}" for k, v in FAST.items()]
        cmd = [str(binaries / "postgres"), "-D", str(data_dir), "-p", str(port),
               "-k", str(data_dir.parent), *options]  # fmt: skip
        with log.open("ab") as out:
            process = subprocess.Popen(
                cmd,
                cwd=data_dir.parent,
                env=server_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                **run_as.popen_kwargs(),  # type: ignore[call-overload]
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
        stop_postmaster(process)
        if "Address already in use" not in _tail(log):
            break
    raise PostgresUnavailable(f"PostgreSQL did not start in {data_dir}:\n{_tail(log)}")


@contextmanager
def private_postgres(database: str = DATABASE) -> Iterator[PostgresServer]:
    """A private PostgreSQL server with an empty ``database``, stopped (and its directory
    removed) on exit."""
    install = packaged_install()
    run_as = server_user()
    # not under pytest's tmp dir: that one is private to root (mode 0700), nobody can't enter
    root = Path(tempfile.mkdtemp(prefix="irq-pg-"))
    data_dir = root / "data"
    log = root / "postgres.log"
    process: subprocess.Popen[bytes] | None = None
    try:
        if run_as.user is not None:
            os.chown(root, run_as.user, run_as.group or -1)
        binaries = bin_dir(install, root, run_as)
        init = subprocess.run(
            [str(binaries / "initdb"), "-D", str(data_dir), "-U", PG_USER,
             "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            cwd=root, env=server_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
            **run_as.popen_kwargs(),  # type: ignore[call-overload]
        )  # fmt: skip
        if init.returncode != 0:
            output = (init.stdout + init.stderr).decode(errors="replace")
            raise PostgresUnavailable(f"initdb failed ({init.returncode}):\n{output}")
        process, port = _start(binaries, run_as, data_dir, log)
        server = PostgresServer(
            "127.0.0.1", port, PG_USER, database, data_dir, process.pid, binaries
        )
        with server.connect("postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        yield server
    finally:
        if process is not None:
            stop_postmaster(process)
        shutil.rmtree(root, ignore_errors=True)
