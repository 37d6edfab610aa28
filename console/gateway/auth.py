"""Bearer tokens with roles, stored hashed under the state dir (``tokens.json``).

``irq token create --role R`` appends a token; a running gateway rereads the file when it
changes, so a new token works at once. Only SHA-256 hashes are stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from console.config import state_dir
from console.model import Role, utcnow

TOKEN_PREFIX = "irq_"


def tokens_path(home: Path | None = None) -> Path:
    return (home or state_dir()) / "tokens.json"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    identity: str
    role: Role


def create_token(role: Role, name: str | None = None, home: Path | None = None) -> str:
    """Create, store (hashed) and return a new token."""
    path = tokens_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = _read(path)
    token = TOKEN_PREFIX + secrets.token_urlsafe(24)
    identity = name or f"{role.value}-{len(entries) + 1}"
    entries.append(
        {"sha256": _hash(token), "role": role.value, "identity": identity,
         "created_at": utcnow().isoformat()}
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return token


def _read(path: Path) -> list[dict[str, str]]:
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
                by_hash[entry["sha256"]] = Principal(entry["identity"], Role(entry["role"]))
            except (KeyError, ValueError):
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
