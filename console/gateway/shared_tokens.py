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

``irq token list|revoke --journal URL`` read the table too (:meth:`SharedTokens.entries`): a
host lists the tokens the other gateways share, and revokes any of them for every gateway
(:meth:`SharedTokens.revoke` sets ``revoked_at`` on the row; each gateway refuses the token
and closes its connections at its next sync, whatever its own file says).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from console.gateway.journal_store import JournalStore, JournalTx

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
            shared = _entries(tx)
        for entry in fresh:
            self._pushed[entry["sha256"]] = bool(entry.get("revoked_at"))
        return shared

    def entries(self) -> list[dict[str, Any]]:
        """Every shared entry, each with ``origin`` (the gateway it came from) and the row's
        revocation; never writes."""
        with self.journal.transaction() as tx:
            return _entries(tx)

    def revoke(self, hashes: Sequence[str], at: str) -> list[str]:
        """Revoke these rows for every gateway (an earlier revocation keeps its time); the
        hashes of the rows there were."""
        done = []
        with self.journal.transaction() as tx:
            for digest in hashes:
                row = tx.execute("UPDATE irq_tokens SET revoked_at=COALESCE(revoked_at, ?)"
                                 " WHERE sha256=? RETURNING sha256", (at, digest)).fetchone()
                if row is not None:
                    done.append(str(row[0]))
        return done


def _entries(tx: JournalTx) -> list[dict[str, Any]]:
    """The table's entries as tokens.json spells them, plus ``origin``; the row's
    ``revoked_at`` counts (a revocation written by ``irq token revoke`` on any host)."""
    shared = []
    for raw, revoked_at, origin in tx.execute(
            "SELECT entry, revoked_at, origin FROM irq_tokens ORDER BY added_at").fetchall():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if revoked_at:
            entry["revoked_at"] = revoked_at
        entry["origin"] = origin
        shared.append(entry)
    return shared
