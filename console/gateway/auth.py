"""Bearer tokens with roles, stored hashed under the state dir (``tokens.json``).

``irq token create --role R`` appends a token; a running gateway rereads the file when it
changes, so a new token works at once. Only SHA-256 hashes are stored. The file is created
0600 (a temporary file opened with that mode, then renamed: there is no moment when it is
readable by others) and concurrent creators are serialised by ``tokens.json.lock``.

Agent tokens carry scopes (``BACKEND:CONTEXT[/RUN_ID_PREFIX]``): the runs they may report
for. An agent token stored without a ``scopes`` field (created before scopes existed, or by
code that passes none) is *unscoped*: the gateway lets it report for any run of its backends,
still bound per run to the first token that reported it, and logs a warning naming it (see
SECURITY.md). ``irq token create --role agent`` always asks for a scope.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import state_dir
from console.model import Role, utcnow

TOKEN_PREFIX = "irq_"


def tokens_path(home: Path | None = None) -> Path:
    return (home or state_dir()) / "tokens.json"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@dataclass(frozen=True)
class AgentScope:
    """Runs an agent token may report for: ``backend:context`` plus a native-id prefix.

    ``context`` ``*`` means every context of the backend; an empty prefix every run."""

    backend: str
    context: str
    prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> AgentScope:
        head, slash, prefix = text.strip().partition("/")
        backend, colon, context = head.partition(":")
        if not colon or not _NAME.fullmatch(backend) or not (
            context == "*" or _NAME.fullmatch(context)
        ):
            raise ValueError(
                f"scope {text!r} is not BACKEND:CONTEXT[/RUN_ID_PREFIX] (e.g. dbos:local, "
                "dbos:prod/nightly-, temporal:*)"
            )
        if slash and not prefix:
            raise ValueError(f"scope {text!r} ends with '/': give a run-id prefix or drop it")
        return cls(backend, context, prefix)

    def covers(self, backend: str, context: str, native_id: str) -> bool:
        return (
            self.backend == backend
            and self.context in ("*", context)
            and native_id.startswith(self.prefix)
        )

    def __str__(self) -> str:
        return f"{self.backend}:{self.context}" + (f"/{self.prefix}" if self.prefix else "")


@dataclass(frozen=True)
class Principal:
    """Who holds a token. ``scopes`` is None for every role but ``agent``, and for an
    unscoped (legacy) agent token; ``token_id`` names the token itself (a hash prefix), so two
    tokens with the same identity name are still told apart."""

    identity: str
    role: Role
    scopes: tuple[AgentScope, ...] | None = None
    token_id: str = ""

    def may_report(self, backend: str, context: str, native_id: str) -> bool:
        if self.role is not Role.AGENT:
            return False
        if self.scopes is None:
            return True  # legacy unscoped agent token (logged by the gateway)
        return any(s.covers(backend, context, native_id) for s in self.scopes)


@contextlib.contextmanager
def _store_lock(path: Path) -> Iterator[None]:
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a file that is 0600 from its first byte."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:  # mkstemp opens with mode 0600, whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def create_token(
    role: Role,
    name: str | None = None,
    home: Path | None = None,
    *,
    scopes: Sequence[AgentScope | str] | None = None,
) -> str:
    """Create, store (hashed) and return a new token.

    ``scopes`` only for agent tokens; an agent token without them is unscoped (legacy)."""
    if scopes is not None and role is not Role.AGENT:
        raise ValueError("scopes are for agent tokens only")
    parsed = [s if isinstance(s, AgentScope) else AgentScope.parse(s) for s in scopes or ()]
    if scopes is not None and not parsed:
        raise ValueError("an agent token needs at least one scope")
    path = tokens_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _store_lock(path):
        entries = _read(path)
        token = TOKEN_PREFIX + secrets.token_urlsafe(24)
        identity = name or f"{role.value}-{len(entries) + 1}"
        entry: dict[str, Any] = {"sha256": _hash(token), "role": role.value,
                                 "identity": identity, "created_at": utcnow().isoformat()}
        if scopes is not None:
            entry["scopes"] = [str(s) for s in parsed]
        entries.append(entry)
        write_private(path, json.dumps(entries, indent=1))
    return token


def _principal(entry: dict[str, Any]) -> Principal:
    role = Role(entry["role"])
    raw = entry.get("scopes")
    scopes: tuple[AgentScope, ...] | None = None
    if role is Role.AGENT and raw is not None:
        # a scope that does not parse is dropped; a token whose scopes all fail covers nothing
        ok = []
        for text in raw if isinstance(raw, list) else []:
            with contextlib.suppress(ValueError, AttributeError):
                ok.append(AgentScope.parse(text))
        scopes = tuple(ok)
    return Principal(str(entry["identity"]), role, scopes, str(entry["sha256"])[:16])


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read token store {path}: {exc}") from exc
    return data if isinstance(data, list) else []


class TokenStore:
    """Looks tokens up, rereading the file whenever its mtime changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: float | None = None
        self._by_hash: dict[str, Principal] = {}

    def _refresh(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._by_hash, self._mtime = {}, None
            return
        if mtime == self._mtime:
            return
        by_hash: dict[str, Principal] = {}
        for entry in _read(self.path):
            try:
                by_hash[entry["sha256"]] = _principal(entry)
            except (KeyError, ValueError, TypeError):
                continue
        self._by_hash, self._mtime = by_hash, mtime

    def authenticate(self, token: str | None) -> Principal | None:
        if not token:
            return None
        self._refresh()
        digest = _hash(token)
        for known, principal in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                return principal
        return None

    def __len__(self) -> int:
        self._refresh()
        return len(self._by_hash)


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
