"""Tokens shared by the gateways of one PostgreSQL journal: the ``irq_tokens`` table.

Each gateway keeps its ``tokens.json`` (``irq token create`` and ``irq token revoke`` write
it, on that gateway's host) and, with a PostgreSQL journal, copies it into ``irq_tokens``
every second (:meth:`SharedTokens.sync`): a token created on one gateway is accepted by every
gateway within about two seconds, and a revocation on any of them counts everywhere (a
revoked row stays revoked: the copy only ever adds a revocation, never takes one back). As in
the file, only SHA-256 hashes are stored, never a token.

The gateway's :class:`~console.gateway.auth.TokenStore` reads the union of its file and the
table (auth.py ``TokenStore.share``), refreshed in the background, so a handshake never waits
on the database.
"""

from __future__ import annotations

import json
from typing import Any

from console.gateway.journal_store import JournalStore

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS irq_tokens (
    sha256 TEXT PRIMARY KEY,
    entry TEXT NOT NULL,              -- the tokens.json entry (hash, role, identity, scopes...)
    revoked_at TEXT,
    origin TEXT NOT NULL DEFAULT '',  -- the gateway whose tokens.json it came from
    added_at DOUBLE PRECISION NOT NULL
)""",
)


class SharedTokens:
    def __init__(self, journal: JournalStore, origin: str) -> None:
        self.journal = journal
        self.origin = origin
        self._pushed: dict[str, bool] = {}  # sha256 -> revoked, as last written from here
        journal.create_tables(list(SCHEMA))

    def sync(self, local: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write this gateway's entries that are new or newly revoked; every shared entry."""
        fresh = [e for e in local if isinstance(e.get("sha256"), str)
                 and self._pushed.get(e["sha256"]) != bool(e.get("revoked_at"))]
        with self.journal.transaction() as tx:
            for entry in fresh:
                tx.execute(
                    "INSERT INTO irq_tokens (sha256, entry, revoked_at, origin, added_at)"
                    " VALUES (?,?,?,?, extract(epoch from clock_timestamp()))"
                    " ON CONFLICT (sha256) DO UPDATE SET"
                    " revoked_at=COALESCE(irq_tokens.revoked_at, excluded.revoked_at)",
                    (entry["sha256"], json.dumps(entry), entry.get("revoked_at") or None,
                     self.origin))
            rows = tx.execute("SELECT entry, revoked_at FROM irq_tokens").fetchall()
        for entry in fresh:
            self._pushed[entry["sha256"]] = bool(entry.get("revoked_at"))
        shared = []
        for raw, revoked_at in rows:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if revoked_at:
                entry["revoked_at"] = revoked_at
            shared.append(entry)
        return shared
