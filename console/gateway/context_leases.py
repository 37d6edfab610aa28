"""Which backend contexts this gateway observes: one gateway per context, by a lease row.

On a shared journal (PostgreSQL) each backend context (``backend:context``) is polled by
exactly one gateway at a time: the one holding its row in ``irq_context_lease``. Every
gateway runs :meth:`ContextLeases.renew` every :data:`RENEW_S` (one short transaction, on the
database's clock):

- it renews its membership (``irq_lease_member``) and the leases it holds, each for
  :data:`TTL_S`; a lease it no longer finds under its name was taken (it had lapsed) and is
  no longer held;
- fair share (:func:`assignment`, computed alike by every gateway from the same rows): with
  N contexts and M live members no gateway is given more than ceil(N / M) while another one
  serving that context has room; a current holder keeps its contexts up to that share, so a
  joining gateway moves only the surplus, which its holder releases and the joiner takes at
  its next round (a second or two); a context only one gateway has a backend for stays
  with it;
- it takes the free or lapsed leases given to it: ``INSERT … ON CONFLICT DO UPDATE … WHERE
  expires_at < now``, so of two gateways reaching for one lease exactly one gets it.

A gateway that stops cleanly releases its leases and its membership (:meth:`release_all`):
a peer takes them on its next round (about a second). One that dies (SIGKILL, host gone)
stops renewing: its leases lapse after :data:`TTL_S` and are taken on the next round, so
within ``TTL_S + RENEW_S`` seconds.

On the SQLite journal (one gateway per file) every context is simply held and nothing is
written.
"""

from __future__ import annotations

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

    def add_context(self, context_key: str) -> None:
        """One more context to lease (a backend added before the gateway starts); on an
        exclusive journal it is held at once, like the others."""
        self.contexts = sorted({*self.contexts, context_key})
        if not self.shared:
            self.held.add(context_key)

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
        serving = {r[0]: {c for c in str(r[1]).split(",") if c} for r in tx.execute(
            "SELECT holder, contexts FROM irq_lease_member WHERE expires_at>=?",
            (now,)).fetchall()}
        serving[self.holder] = set(self.contexts)
        self.members = sorted(serving)
        rows = {r[0]: (r[1], float(r[2])) for r in tx.execute(
            "SELECT context_key, holder, expires_at FROM irq_context_lease"
            " WHERE context_key = ANY(?)", (self.contexts,)).fetchall()}
        current = {c: h for c, (h, e) in rows.items() if e >= now}
        want = {c for c, m in assignment(serving, current).items() if m == self.holder}
        surplus = sorted(held - want)
        if surplus:  # assigned to a live peer (one joined): it takes them at its next round
            tx.execute("DELETE FROM irq_context_lease WHERE holder=? AND context_key = ANY(?)",
                       (self.holder, surplus))
            held -= set(surplus)
            for c in surplus:
                rows.pop(c, None)
        for context_key in sorted(want - held):
            if context_key in current and current[context_key] != self.holder:
                continue  # still held by a live peer, which releases it at its next round
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


def assignment(serving: dict[str, set[str]], current: dict[str, str]) -> dict[str, str]:
    """Who should observe each context: ``serving`` (live gateway -> the contexts it has a
    backend for), ``current`` (context -> its unexpired holder). Every gateway computes the
    same answer from the same rows.

    Fair share: no gateway is given more than ceil(contexts / gateways) while another serving
    that context has room. Sticky: a current holder keeps its contexts up to that share, so
    a join moves only the surplus. Contexts fewer gateways can serve are placed first, so a
    gateway with a context nobody else has keeps that one rather than a shared one."""
    contexts = sorted(set().union(*serving.values())) if serving else []
    if not contexts:
        return {}
    floor, extras = divmod(len(contexts), len(serving))  # ``extras`` gateways get one more
    candidates = {c: sorted(m for m, served in serving.items() if c in served)
                  for c in contexts}
    order = sorted(contexts, key=lambda c: (len(candidates[c]), c))
    load = dict.fromkeys(serving, 0)
    placed: dict[str, str] = {}
    for c in order:  # sticky first: a holder keeps up to the floor of the share...
        holder = current.get(c)
        if holder in load and holder in candidates[c] and load[holder] < floor:
            placed[c] = holder
            load[holder] += 1
    for c in order:  # ...and one more while some gateways may have one more than the floor
        holder = current.get(c)
        if c not in placed and extras and holder in load and holder in candidates[c] \
                and load[holder] == floor:
            placed[c] = holder
            load[holder] += 1
            extras -= 1
    for c in order:  # the rest to the least loaded gateway serving it
        if c not in placed:
            chosen = min(candidates[c], key=lambda m: (load[m], m))
            placed[c] = chosen
            load[chosen] += 1
    return placed
