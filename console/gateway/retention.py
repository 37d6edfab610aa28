"""Retention: what is settled leaves the journal after a configured time; the audit stays.

Decided approvals (the decision claims the journal holds per interrupt, the four-eyes
approvals recorded for them, and the decision commands' idempotency rows) and settled
obligations (fulfilled or waived) are deleted once older than the retention (``retention =
"30d"`` in the context, ``irq serve --retention``). The ``audit`` table is never pruned here:
it keeps who decided what, when and why. Each store that keeps settled rows implements
:class:`Prunable`; the gateway prunes them all periodically (the alert store implements it
too, for cleared alerts). On a journal shared by several gateways each of them prunes: the
deletes are idempotent, so two gateways pruning together remove each row once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

from console.gateway.journal_store import JournalStore
from console.model import DecisionKind

log = logging.getLogger("irq.gateway")

DEFAULT_RETENTION = timedelta(days=30)
PRUNE_INTERVAL_S = 600.0  # settled rows are few and old: a prune every ten minutes suffices

_DECISION_ACTIONS = tuple(k.value for k in DecisionKind)


class Prunable(Protocol):
    """A store whose settled rows may leave the journal."""

    def prune(self, before: datetime) -> int:
        """Delete the rows settled before ``before``; how many were deleted."""
        ...


def _iso(at: datetime) -> str:
    """The journal's time text (UTC ISO, as journal_sql.py writes it): compares as text."""
    return at.astimezone(UTC).isoformat()


class DecidedApprovals:
    """Decision claims that were applied, the approvals recorded for them, and the
    decision commands' rows (their idempotency records), settled before the cut-off."""

    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal

    def prune(self, before: datetime) -> int:
        cut = _iso(before)
        marks = ",".join("?" for _ in _DECISION_ACTIONS)
        with self.journal.transaction() as db:
            approvals = db.execute(
                "DELETE FROM approvals WHERE interrupt_id IN (SELECT interrupt_id FROM"
                " decisions WHERE status='applied' AND at < ?)", (cut,)).rowcount
            claims = db.execute(
                "DELETE FROM decisions WHERE status='applied' AND at < ?", (cut,)).rowcount
            commands = db.execute(
                f"DELETE FROM commands WHERE status <> 'intent' AND created_at < ?"
                f" AND action IN ({marks})", (cut, *_DECISION_ACTIONS)).rowcount
        return max(approvals, 0) + max(claims, 0) + max(commands, 0)


class SettledObligations:
    """Obligations fulfilled or waived before the cut-off."""

    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal

    def prune(self, before: datetime) -> int:
        with self.journal.transaction() as db:
            gone = db.execute(
                "DELETE FROM obligations WHERE state IN ('fulfilled', 'waived')"
                " AND closed_at IS NOT NULL AND closed_at < ?", (_iso(before),)).rowcount
        return max(gone, 0)


class Retention:
    """Prunes every :class:`Prunable` it was given of what is older than ``keep``."""

    def __init__(self, keep: timedelta, stores: Sequence[Prunable],
                 clock: Callable[[], datetime], interval_s: float = PRUNE_INTERVAL_S) -> None:
        self.keep = keep
        self.stores = list(stores)
        self.clock = clock
        self.interval_s = interval_s

    def prune(self) -> int:
        """One pass: the rows pruned, all stores together."""
        before = self.clock() - self.keep
        total = 0
        for store in self.stores:
            try:
                total += store.prune(before)
            except Exception:  # one store's failure (a database blip) must not stop the others
                log.exception("pruning %s failed", type(store).__name__)
        if total:
            log.info("retention %s: pruned %d settled rows older than %s", self.keep, total,
                     before.isoformat(timespec="seconds"))
        return total

    async def run(self) -> None:
        while True:
            await asyncio.to_thread(self.prune)
            await asyncio.sleep(self.interval_s)
