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

Lifecycle: a token may carry ``expires_at`` (``irq token create --ttl 8h``) and
``revoked_at`` (``irq token revoke``); the handshake refuses either with 401 and the reason
(``expired`` / ``revoked``), and the gateway closes open connections of such a token within a
second. The gateway records each token's last use in ``tokens-used.json`` (at the handshake,
at most one write per token per ``LAST_USE_WRITE_S``), so the token file itself is written
only by ``irq token`` commands.
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from console.config import state_dir
from console.model import Role, utcnow

TOKEN_PREFIX = "irq_"
SHOWN_PREFIX_CHARS = 10  # ``irq_`` + 6 characters of the secret, kept to name the token
LAST_USE_WRITE_S = 60.0


def tokens_path(home: Path | None = None) -> Path:
    return (home or state_dir()) / "tokens.json"


def last_use_path(home: Path | None = None) -> Path:
    return (home or state_dir()) / "tokens-used.json"


def token_id(entry: dict[str, Any]) -> str:
    """The stable name of a stored token: its hash prefix (``Principal.token_id``)."""
    return str(entry.get("sha256", ""))[:16]


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
    ttl_s: float | None = None,
) -> str:
    """Create, store (hashed) and return a new token.

    ``scopes`` only for agent tokens; an agent token without them is unscoped (legacy).
    ``ttl_s``: the token expires that many seconds from now (refused at the handshake)."""
    if ttl_s is not None and ttl_s <= 0:
        raise ValueError("a token's ttl must be positive")
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
        now = utcnow()
        entry: dict[str, Any] = {"sha256": _hash(token), "role": role.value,
                                 "identity": identity, "created_at": now.isoformat(),
                                 "prefix": token[:SHOWN_PREFIX_CHARS]}
        if ttl_s is not None:
            entry["expires_at"] = (now + timedelta(seconds=ttl_s)).isoformat()
        if scopes is not None:
            entry["scopes"] = [str(s) for s in parsed]
        entries.append(entry)
        write_private(path, json.dumps(entries, indent=1))
    return token


def matching_tokens(entries: Sequence[dict[str, Any]], selector: str) -> list[dict[str, Any]]:
    """The stored tokens ``selector`` names: every token with that identity, else those whose
    shown prefix (``irq_…``) or id (hash prefix, 6+ characters) starts with it, or the one
    token it is."""
    named = [e for e in entries if e.get("identity") == selector]
    if named:
        return named
    if selector.startswith(TOKEN_PREFIX):  # the whole token, or the prefix ``token list`` shows
        whole = [e for e in entries if e.get("sha256") == _hash(selector)]
        if whole or len(selector) <= len(TOKEN_PREFIX):
            return whole
        return [e for e in entries if str(e.get("prefix") or "").startswith(selector)]
    if len(selector) >= 6:
        return [e for e in entries if token_id(e).startswith(selector.lower())]
    return []


def revoke_tokens(ids: Sequence[str], home: Path | None = None) -> list[dict[str, Any]]:
    """Mark the tokens with these ids revoked (a running gateway refuses them at once and
    closes their connections); returns the entries revoked now."""
    path = tokens_path(home)
    wanted = set(ids)
    with _store_lock(path):
        entries = _read(path)
        done = []
        now = utcnow().isoformat()
        for entry in entries:
            if token_id(entry) in wanted and not entry.get("revoked_at"):
                entry["revoked_at"] = now
                done.append(entry)
        if done:
            write_private(path, json.dumps(entries, indent=1))
    return done


def merged_tokens(local: Sequence[dict[str, Any]],
                  shared: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """This host's entries and the shared ones (shared_tokens.py), one per hash, as the
    gateway accepts them and ``irq token list`` shows them: the file's entry, else the shared
    one; a revocation in either counts (the file's time, else the table's). Each copy gains
    ``local`` (it is in this host's file) and ``origin`` (the gateway that shared it, "" when
    the table does not have it)."""
    from_table = {e["sha256"]: e for e in shared
                  if isinstance(e, dict) and isinstance(e.get("sha256"), str)}
    merged: dict[str, dict[str, Any]] = {}
    for entry in local:
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str):
            continue
        twin = from_table.get(digest, {})
        merged[digest] = {**entry, "local": True, "origin": str(twin.get("origin") or ""),
                          "revoked_at": entry.get("revoked_at") or twin.get("revoked_at")}
    for digest, entry in from_table.items():
        merged.setdefault(digest, {**entry, "local": False,
                                   "origin": str(entry.get("origin") or "")})
    return list(merged.values())


def read_last_use(home: Path | None = None) -> dict[str, str]:
    """token id -> ISO time of its last accepted handshake (as recorded, throttled)."""
    try:
        data = json.loads(last_use_path(home).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def token_state(entry: dict[str, Any], now: datetime | None = None) -> str:
    """``active``, ``expired`` or ``revoked``."""
    if entry.get("revoked_at"):
        return "revoked"
    expires = _when(entry.get("expires_at"))
    if expires is not None and expires <= (now or utcnow()):
        return "expired"
    return "active"


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


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


@dataclass(frozen=True)
class _Stored:
    principal: Principal
    expires_at: datetime | None
    revoked: bool

    def refusal(self, now: datetime) -> str:
        """"" when the token is good now, else ``revoked`` / ``expired``."""
        if self.revoked:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return ""


class TokenStore:
    """Looks tokens up, rereading the file whenever its mtime changes (so a token created or
    revoked by ``irq token`` counts at the next handshake)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: float | None = None
        self._by_hash: dict[str, _Stored] = {}
        self._by_id: dict[str, _Stored] = {}
        self._last_write: dict[str, float] = {}  # token id -> monotonic time of the last write
        #: set by :meth:`share`: the entries of the gateways sharing this one's journal
        self._share: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
        self._shared: tuple[int, list[dict[str, Any]]] = (0, [])
        self._shared_seen = 0

    def share(self, sync: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
        """Accept the tokens of every gateway sharing this one's journal too (and offer this
        one's): ``sync(local entries)`` returns the shared entries (shared_tokens.py). Called
        through :meth:`sync_shared`, in the background: a handshake never waits on it."""
        self._share = sync

    def sync_shared(self) -> None:
        """Exchange entries with the shared store (blocking: run it in a thread)."""
        if self._share is None:
            return
        try:
            local = _read(self.path)
        except ValueError:
            local = []
        shared = self._share(local)
        self._shared = (self._shared[0] + 1, shared)

    def _refresh(self) -> None:
        try:
            mtime: float | None = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        version, shared = self._shared
        if mtime == self._mtime and version == self._shared_seen:
            return
        self._shared_seen = version
        by_hash: dict[str, _Stored] = {}
        local = _read(self.path) if mtime is not None else []
        for entry in merged_tokens(local, shared):
            try:
                by_hash[entry["sha256"]] = _Stored(_principal(entry), _when(entry.get(
                    "expires_at")), bool(entry.get("revoked_at")))
            except (KeyError, ValueError, TypeError):
                continue
        self._by_hash, self._mtime = by_hash, mtime
        self._by_id = {s.principal.token_id: s for s in by_hash.values()}

    def check(self, token: str | None) -> tuple[Principal | None, str]:
        """(principal, "") for a good token, else (None, why): ``no token``, ``unknown
        token``, ``expired`` or ``revoked``."""
        if not token:
            return None, "no token"
        self._refresh()
        digest = _hash(token)
        for known, stored in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                why = stored.refusal(utcnow())
                return (None, why) if why else (stored.principal, "")
        return None, "unknown token"

    def authenticate(self, token: str | None) -> Principal | None:
        return self.check(token)[0]

    def still_valid(self, principal: Principal) -> bool:
        """False once the principal's token is revoked, expired or gone from the file."""
        self._refresh()
        stored = self._by_id.get(principal.token_id)
        return stored is not None and not stored.refusal(utcnow())

    def record_use(self, principal: Principal, *, now: float | None = None) -> bool:
        """Note an accepted handshake in ``tokens-used.json``; at most one write per token per
        ``LAST_USE_WRITE_S`` (True when this call wrote)."""
        import time

        clock = time.monotonic() if now is None else now
        last = self._last_write.get(principal.token_id)
        if last is not None and clock - last < LAST_USE_WRITE_S:
            return False
        self._last_write[principal.token_id] = clock
        path = self.path.with_name(last_use_path(Path("/")).name)
        with _store_lock(path):
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                data = {}
            if not isinstance(data, dict):
                data = {}
            data[principal.token_id] = utcnow().isoformat()
            write_private(path, json.dumps(data, indent=1))
        return True

    def __len__(self) -> int:
        self._refresh()
        return len(self._by_hash)


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
