"""Events between gateways sharing one PostgreSQL journal: the ``irq_gateway_events`` table.

A gateway writes what its clients' view of the world is made of — a leaseholder's
observations of its backend contexts, the agent beats it received, its notices and audit
entries — as one row per batch (every 0.25 s at most; peering.py) and NOTIFYs the row's
``seq`` on :data:`CHANNEL`. Its peers LISTEN, read the rows after the last ``seq`` they
applied and apply them to their own hub, so a client or an agent connected to any gateway
sees every run, interrupt and heartbeat.

Rows are written under a transaction-scoped advisory lock, so ``seq`` order is commit order
and a reader that read up to ``seq`` never finds a smaller one committed later. Rows older
than :data:`KEEP_S` are pruned; a gateway that fell further behind (or just started) asks
its peers for their current state (a ``join`` row) instead of reading history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from console.gateway.journal_store import JournalStore

CHANNEL = "irq_gateway_events"
#: ``pg_advisory_xact_lock`` key serialising writers ("irqe" in ASCII)
WRITE_LOCK = 0x69727165
KEEP_S = 300.0  # rows older than this are pruned
ROW_BYTES = 1 << 20  # a batch is split over rows of about this size (a joining peer's state)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS irq_gateway_events (
    seq BIGSERIAL PRIMARY KEY,
    origin TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload JSONB NOT NULL,
    at DOUBLE PRECISION NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS irq_gateway_events_at ON irq_gateway_events(at)",
)


@dataclass(frozen=True)
class PeerRow:
    seq: int
    origin: str
    kind: str  # batch | join
    payload: Any


class PeerEvents:
    """The table, through the journal's connection (each call one short transaction)."""

    def __init__(self, journal: JournalStore, origin: str) -> None:
        self.journal = journal
        self.origin = origin
        journal.create_tables(list(SCHEMA))

    def write(self, kind: str, payload: Any) -> int:
        """One row (a batch's items split over several rows of at most
        :data:`ROW_BYTES` each, in one transaction), NOTIFYd on commit; the last ``seq``."""
        bodies: list[str] = []
        if not isinstance(payload, list):
            bodies.append(json.dumps(payload))
        else:
            part: list[str] = []
            size = 0
            for item in payload:
                encoded = json.dumps(item)
                if part and size + len(encoded) > ROW_BYTES:
                    bodies.append("[" + ",".join(part) + "]")
                    part, size = [], 0
                part.append(encoded)
                size += len(encoded) + 1
            bodies.append("[" + ",".join(part) + "]")
        with self.journal.transaction() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK,))
            seq = 0
            for body in bodies:
                seq = int(tx.execute(
                    "INSERT INTO irq_gateway_events (origin, kind, payload, at)"
                    " VALUES (?, ?, CAST(? AS JSONB), extract(epoch from clock_timestamp()))"
                    " RETURNING seq", (self.origin, kind, body)).fetchone()[0])
            tx.execute("SELECT pg_notify(?, ?)", (CHANNEL, str(seq)))
        return seq

    def read_since(self, seq: int, limit: int = 50) -> list[PeerRow]:
        """The peers' rows after ``seq`` (not this gateway's own), oldest first."""
        with self.journal.transaction() as tx:
            rows = tx.execute(
                "SELECT seq, origin, kind, payload FROM irq_gateway_events"
                " WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)).fetchall()
        return [PeerRow(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def bounds(self) -> tuple[int, int]:
        """(oldest seq kept, newest seq); (0, 0) for an empty table."""
        with self.journal.transaction() as tx:
            row = tx.execute("SELECT min(seq), max(seq) FROM irq_gateway_events").fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def prune(self, keep_s: float = KEEP_S) -> int:
        with self.journal.transaction() as tx:
            cur = tx.execute("DELETE FROM irq_gateway_events"
                             " WHERE at < extract(epoch from clock_timestamp()) - ?", (keep_s,))
            return int(cur.rowcount or 0)
