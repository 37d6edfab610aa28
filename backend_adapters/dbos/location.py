"""Where a DBOS system database lives: a SQLite file or a Postgres URL.

SQLite URLs are ambiguous in practice: SQLAlchemy reads ``sqlite:///rel.db`` as relative and
``sqlite:////abs.db`` as absolute, while irq's URL examples write ``dbos+sqlite:///var/lib/x.db``
for an absolute path. irq accepts both: four slashes are absolute; with three, an existing
absolute file wins over an existing relative one. The file must exist: a DBOS client would
silently create an empty database file otherwise.

A PostgreSQL password need not be in the URL (where ``ps`` and ``config.toml`` show it):
``dbos+postgresql://irq@db/dbos?password_env=PGPASS`` reads it from the environment variable,
``?password_file=/run/secrets/pg`` from a file (backend_adapters/url_secrets.py). libpq's own
``PGPASSWORD`` and ``~/.pgpass`` (``passfile=``) work as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from backend_adapters.base import BackendURLError, Unreachable
from backend_adapters.url_secrets import take_secret

#: query parameters the DBOS adapter reads itself (never passed on to the database URL)
ADAPTER_PARAMS = frozenset({"lookback_s", "finished_limit", "call_timeout_s", "rescan_s"})


@dataclass(frozen=True)
class DatabaseLocation:
    url: str = field(repr=False)  # what DBOSClient gets (may hold credentials)
    display: str  # without credentials
    sqlite_path: Path | None = None

    def check_exists(self) -> None:
        """Raise Unreachable when a SQLite database file is missing (never create one)."""
        if self.sqlite_path is None:
            return
        if not self.sqlite_path.is_file():
            raise Unreachable(
                f"no DBOS system database at {self.sqlite_path} (file does not exist)",
                target=self.display,
            )


def _sqlite_remainder(url: str) -> str:
    """What follows ``sqlite:`` with exactly the slashes the user wrote."""
    return url.split(":", 1)[1].split("?", 1)[0]


def sqlite_candidates(url: str) -> list[Path]:
    rest = _sqlite_remainder(url)
    if rest.startswith("////"):
        return [Path("/" + rest.lstrip("/"))]
    bare = rest.lstrip("/")
    if not bare:
        return []
    return [Path("/" + bare), Path(bare).resolve()]


def locate(raw: str, target: str, params: dict[str, str]) -> DatabaseLocation:
    """The database behind a parsed ``dbos+...`` backend URL.

    ``raw`` is the URL as the user wrote it (preferred: the parsed ``target`` loses the slashes
    of an empty SQLite netloc); ``params`` are the non-irq query parameters.
    """
    source = raw.split("+", 1)[1] if raw.startswith("dbos+") else (raw or target)
    scheme = source.split(":", 1)[0].lower()
    params = dict(params)
    password = take_secret(params, "password")  # password_env= / password_file=
    if password is not None and not scheme.startswith("postgres"):
        raise BackendURLError("password_env= and password_file= are for PostgreSQL URLs")
    if scheme == "sqlite":
        candidates = sqlite_candidates(source)
        if not candidates:
            raise Unreachable(f"no SQLite file path in {source!r}", target=source)
        chosen = next((c for c in candidates if c.is_file()), candidates[0])
        return DatabaseLocation(
            url=f"sqlite:///{chosen}", display=f"sqlite:///{chosen}", sqlite_path=chosen
        )
    if scheme.startswith("postgres"):
        parts = urlsplit(target)
        query = {k: v for k, v in params.items() if k not in ADAPTER_PARAMS}
        netloc = parts.netloc.rsplit("@", 1)[-1]
        credentials = parts.netloc
        if password is not None:
            user = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
            if ":" in user:
                raise BackendURLError(
                    "the URL has a password and names one with password_env=/password_file="
                )
            if not user:
                raise BackendURLError(
                    "password_env=/password_file= need a user in the URL: "
                    "dbos+postgresql://USER@host/db?password_env=VAR"
                )
            credentials = f"{user}:{quote(password, safe='')}@{netloc}"
        url = urlunsplit((parts.scheme, credentials, parts.path, urlencode(query), ""))
        return DatabaseLocation(
            url=url, display=urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        )
    raise Unreachable(
        f"not a DBOS system database URL: {source!r} (expected sqlite:///PATH or postgresql://...)",
        target=source,
    )
