"""The gateway's index of interrupts, as operators see them.

Adapters' polls (and peers' news) feed it; an interrupt the journal has decided is shown
decided even while the backend still shows it pending (the agent has not consumed the
decision yet), so nobody decides it twice. Every interrupt is shown through ``shown``, given
at construction: the four-eyes overlay (approval_view.py) that adds the approvals the journal
holds. The store reads that data; it never calls the command executor.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from console.gateway.shared_values import EMPTY_LIST
from console.model import DecisionRecord, Interrupt

DECIDED_INTERRUPT_TTL = timedelta(minutes=10)

#: an interrupt as operators see it (with the approvals so far); the identity by default
InterruptOverlay = Callable[[Interrupt], Interrupt]


def no_overlay(intr: Interrupt) -> Interrupt:
    """The overlay of a hub without four-eyes approvals (unit tests, benchmarks)."""
    return intr


class InterruptStore:
    def __init__(self, publish: Callable[[str, dict[str, Any]], Any], *,
                 shown: InterruptOverlay = no_overlay) -> None:
        self.publish = publish
        self.shown = shown
        self.interrupts: dict[str, Interrupt] = {}
        self._pending_by_run: dict[str, set[str]] = {}  # run id -> pending interrupt ids

    def pending(self, run_id: str) -> list[str]:
        """The ids of ``run_id``'s pending interrupts, sorted (a merged run's ``interrupts``;
        one shared empty list for the runs with none: shared_values.py)."""
        pending = self._pending_by_run.get(run_id)
        return sorted(pending) if pending else EMPTY_LIST

    def observe(self, context_key: str, interrupts: list[Interrupt], complete: bool,
                decided: Callable[[str], Any]) -> set[str]:
        """Merge one backend context's pending interrupts; the runs whose interrupts changed.

        ``decided(interrupt_id)`` returns the journal's decision claim (or None).
        ``complete``: ``interrupts`` are all the context's pending ones (the others are
        withdrawn, or decided if the journal says so).
        """
        seen: set[str] = set()
        touched_runs: set[str] = set()
        for intr in interrupts:
            seen.add(intr.id)
            known = self.interrupts.get(intr.id)
            if known is not None and known.status != "pending":
                continue
            claim = decided(intr.id)
            if claim is not None and claim.status == "applied":
                intr = _as_decided(intr, claim)
            intr = self.shown(intr)
            if known is None or known.model_dump() != intr.model_dump():
                self._put(intr)
                self.publish("interrupt", intr.contract())
                touched_runs.add(intr.run_id)
        if complete:
            for iid, intr in list(self.interrupts.items()):
                if iid in seen or intr.status != "pending":
                    continue
                if not intr.run_id.startswith(context_key + "/"):
                    continue
                claim = decided(iid)
                new = (
                    self._decided(intr, claim) if claim is not None and claim.status == "applied"
                    else intr.model_copy(update={"status": "withdrawn"})
                )
                self._put(new)
                self.publish("interrupt", new.contract())
                touched_runs.add(intr.run_id)
        return touched_runs

    def mark_decided(self, interrupt_id: str, claim: Any) -> str | None:
        """The journal's ``claim`` decided the interrupt: its run's id (None: unknown here)."""
        intr = self.interrupts.get(interrupt_id)
        if intr is None:
            return None
        new = self._decided(intr, claim)
        self._put(new)
        self.publish("interrupt", new.contract())
        return intr.run_id

    def reshow(self, interrupt_id: str) -> None:
        """Its approvals changed (recorded here or through a peer): show it anew."""
        intr = self.interrupts.get(interrupt_id)
        if intr is None:
            return
        shown = self.shown(intr)
        if shown is not intr:
            self.interrupts[interrupt_id] = shown
            self.publish("interrupt", shown.contract())

    def expire(self, now: datetime) -> None:
        """Interrupts decided or withdrawn long enough ago leave the index."""
        for iid, intr in list(self.interrupts.items()):
            decided_at = intr.decision.at if intr.decision else intr.created_at
            if intr.status != "pending" and now - decided_at > DECIDED_INTERRUPT_TTL:
                self._forget(iid)
                self.publish("interrupt_removed", {"id": iid})

    def _put(self, intr: Interrupt) -> None:
        self.interrupts[intr.id] = intr
        pending = self._pending_by_run.setdefault(intr.run_id, set())
        if intr.status == "pending":
            pending.add(intr.id)
        else:
            pending.discard(intr.id)
            if not pending:
                del self._pending_by_run[intr.run_id]

    def _forget(self, interrupt_id: str) -> None:
        intr = self.interrupts.pop(interrupt_id)
        pending = self._pending_by_run.get(intr.run_id)
        if pending is not None:
            pending.discard(interrupt_id)
            if not pending:
                del self._pending_by_run[intr.run_id]

    def _decided(self, intr: Interrupt, claim: Any) -> Interrupt:
        """``intr`` decided by ``claim``, shown with the journal's approvals as they stand: the
        last approver's is written with the claim, perhaps through a peer gateway whose news of
        it has not arrived here yet (a decided interrupt listing one approver of two)."""
        return self.shown(_as_decided(intr, claim))


def _as_decided(intr: Interrupt, claim: Any) -> Interrupt:
    return intr.model_copy(update={
        "status": "decided",
        "decision": DecisionRecord(kind=claim.kind, by=claim.identity, at=claim.at,
                                   command_id=claim.command_key),
    })
