"""Which backend contexts this gateway observes: one gateway per context, by a lease row.

On a shared journal (PostgreSQL) each backend context (``backend:context``) is polled by
exactly one gateway at a time: the one holding its row in ``irq_context_lease``. Every
gateway runs :meth:`ContextLeases.renew` every :data:`RENEW_S` (one short transaction, on the
database's clock):

- it renews its membership (``irq_lease_member``) and the leases it holds, each for
  :data:`TTL_S`; a lease it no longer finds under its name was taken (it had lapsed) and is
  no longer held;
- fair share: with N contexts and M live members a gateway holds at most ceil(N / M); a
  surplus is released (a peer takes it on its next round, so a joining gateway gets its share
  within a second or two);
- it takes free or lapsed leases up to its share: ``INSERT … ON CONFLICT DO UPDATE … WHERE
  expires_at < now``, so of two gateways reaching for one lease exactly one gets it.

A gateway that stops cleanly releases its leases and its membership (:meth:`release_all`):
a peer takes them on its next round (about a second). One that dies (SIGKILL, host gone)
stops renewing: its leases lapse after :data:`TTL_S` and are taken on the next round, so
within ``TTL_S + RENEW_S`` seconds.

On the SQLite journal (one gateway per file) every context is simply held and nothing is
written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.gateway.journal_store import JournalStore, JournalTx

RENEW_S = 1.0  # one round of renewing, balancing and taking
TTL_S = 3.0  # a lease (and a membership) not renewed for this long has lapsed

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS irq_context_lease (
    context_key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    taken_at DOUBLE PRECISION NOT NULL,
    takeovers BIGINT NOT NULL DEFAULT 0
)""",
    """CREATE TABLE IF NOT EXISTS irq_lease_member (
    holder TEXT PRIMARY KEY,
    expires_at DOUBLE PRECISION NOT NULL,
    contexts TEXT NOT NULL DEFAULT ''
)""",
)


@dataclass(frozen=True)
class LeaseRow:
    context_key: str
    holder: str
    expires_in_s: float  # negative: lapsed

    def contract(self) -> dict[str, Any]:
        return {"context": self.context_key, "holder": self.holder,
                "expires_in_s": round(self.expires_in_s, 2)}


@dataclass(frozen=True)
class RoundResult:
    """What one round changed: contexts taken and lost (released or taken by a peer)."""

    taken: frozenset[str]
    lost: frozenset[str]


class ContextLeases:
    def __init__(self, journal: JournalStore, holder: str, contexts: Sequence[str], *,
                 ttl_s: float = TTL_S) -> None:
        self.journal = journal
        self.holder = holder
        self.contexts = sorted(set(contexts))
        self.ttl_s = ttl_s
        self.shared = not journal.exclusive
        #: the contexts this gateway observes now (all of them on an exclusive journal)
        self.held: set[str] = set() if self.shared else set(self.contexts)
        self.members: list[str] = [holder]
        self.leases: list[LeaseRow] = []
        self.rounds = 0
        self.taken_total = 0
        if self.shared:
            journal.create_tables(list(SCHEMA))

    def holds(self, context_key: str) -> bool:
        return context_key in self.held

    def renew(self) -> RoundResult:
        """One round (blocking: run it in a thread). Raises what the journal raises."""
        if not self.shared:
            return RoundResult(frozenset(), frozenset())
        before = set(self.held)
        with self.journal.transaction() as tx:
            held = self._round(tx)
        self.held = held
        self.rounds += 1
        taken = frozenset(held - before)
        self.taken_total += len(taken)
        return RoundResult(taken, frozenset(before - held))

    def _round(self, tx: JournalTx) -> set[str]:
        now = float(tx.execute("SELECT extract(epoch from clock_timestamp())").fetchone()[0])
        until = now + self.ttl_s
        tx.execute(
            "INSERT INTO irq_lease_member (holder, expires_at, contexts) VALUES (?,?,?)"
            " ON CONFLICT (holder) DO UPDATE SET expires_at=excluded.expires_at,"
            " contexts=excluded.contexts", (self.holder, until, ",".join(self.contexts)))
        held = {r[0] for r in tx.execute(
            "UPDATE irq_context_lease SET expires_at=? WHERE holder=? AND expires_at>=?"
            " RETURNING context_key", (until, self.holder, now)).fetchall()}
        held &= set(self.contexts)
        self.members = sorted(r[0] for r in tx.execute(
            "SELECT holder FROM irq_lease_member WHERE expires_at>=?", (now,)).fetchall())
        live = max(1, len(self.members))
        share = math.ceil(len(self.contexts) / live) if self.contexts else 0
        if len(held) > share:  # a peer joined: hand the surplus over (it takes it next round)
            surplus = sorted(held)[share:]
            tx.execute("DELETE FROM irq_context_lease WHERE holder=? AND context_key = ANY(?)",
                       (self.holder, surplus))
            held -= set(surplus)
        rows = {r[0]: (r[1], float(r[2])) for r in tx.execute(
            "SELECT context_key, holder, expires_at FROM irq_context_lease"
            " WHERE context_key = ANY(?)", (self.contexts,)).fetchall()}
        free = [c for c in self.contexts
                if c not in held and (c not in rows or rows[c][1] < now)]
        for context_key in free[:max(0, share - len(held))]:
            got = tx.execute(
                "INSERT INTO irq_context_lease (context_key, holder, expires_at, taken_at)"
                " VALUES (?,?,?,?) ON CONFLICT (context_key) DO UPDATE SET"
                " holder=excluded.holder, expires_at=excluded.expires_at,"
                " taken_at=excluded.taken_at,"
                " takeovers=irq_context_lease.takeovers+1"
                " WHERE irq_context_lease.expires_at < ? RETURNING context_key",
                (context_key, self.holder, until, now, now)).fetchone()
            if got is not None:
                held.add(context_key)
                rows[context_key] = (self.holder, until)
        self.leases = [LeaseRow(k, h, e - now) for k, (h, e) in sorted(rows.items())]
        return held

    def release_all(self) -> None:
        """A clean stop: leases and membership go at once (peers take over next round)."""
        if not self.shared:
            return
        with self.journal.transaction() as tx:
            tx.execute("DELETE FROM irq_context_lease WHERE holder=?", (self.holder,))
            tx.execute("DELETE FROM irq_lease_member WHERE holder=?", (self.holder,))
        self.held = set()

    def stats(self) -> dict[str, Any]:
        """``stats()["peers"]``: this gateway, the live members, who holds what."""
        return {
            "gateway": self.holder,
            "shared": self.shared,
            "members": list(self.members),
            "held": sorted(self.held),
            "leases": [row.contract() for row in self.leases],
            "rounds": self.rounds,
            "taken": self.taken_total,
        }
