"""Leaks: resources irq believes should be free but are still reported held, and the
conditions they raise (``leak_suspected``, ``held_too_long``). Pure functions over runs as the
hub indexes them, so ``irq leaks``, the alert evaluator and tests ask the one rule.

A resource is leaked by the rule of console/leak_rule.py (no release report after a pause or
cancel, or still held by a run that ended).

``held_too_long``: a paused run keeping an ``on_pause = "keep"`` resource (by design, so it can
resume at once) for longer than the operator's ``held_too_long_after``: worth a look, not a
leak. ``cost`` stays None until a price is known for the resource kind (work-at-risk prices).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from console.alert_model import AlertKind, Condition
from console.leak_rule import LeakReason, leak_reason
from console.model import RunState
from console.run_record import RunFacts

DEFAULT_HELD_TOO_LONG = timedelta(hours=1)


#: a resource kind's price per hour, when one is known (None: unknown)
PricePerHour = Callable[[str], float | None]


@dataclass(frozen=True)
class Leak:
    """One resource believed leaked (``irq leaks -o json`` prints :meth:`contract`)."""

    run_id: str
    resource_id: str
    kind: str
    reason: LeakReason
    run_state: str
    since: datetime | None  # when irq last heard of the run (its end, the report that held)
    detail: str = ""
    cost: float | None = None  # at the kind's price since ``since``; None: no price known

    @property
    def subject(self) -> str:
        return f"{self.run_id}/{self.resource_id}"

    def age_s(self, now: datetime) -> float | None:
        return max(0.0, (now - self.since).total_seconds()) if self.since else None

    def contract(self, now: datetime) -> dict[str, Any]:
        age = self.age_s(now)
        return {
            "run": self.run_id,
            "resource": self.resource_id,
            "kind": self.kind,
            "reason": self.reason,
            "run_state": self.run_state,
            "since": self.since.isoformat() if self.since else None,
            "age_s": round(age, 3) if age is not None else None,
            "detail": self.detail,
            "cost": self.cost,
        }


def _since(run: RunFacts) -> datetime | None:
    return run.heartbeat_at or run.observed_at or run.updated_at


def leaks(runs: Iterable[RunFacts], now: datetime,
          price_per_hour: PricePerHour | None = None) -> list[Leak]:
    """Every leaked resource of ``runs``, oldest first."""
    found = []
    for run in runs:
        for resource in run.resources:
            reason = leak_reason(resource.state, run.state.value)
            if reason is None:
                continue
            since = _since(run)
            price = price_per_hour(resource.kind) if price_per_hour is not None else None
            cost = None
            if price is not None and since is not None:
                cost = round(price * max(0.0, (now - since).total_seconds()) / 3600.0, 2)
            found.append(Leak(run_id=run.id, resource_id=resource.id, kind=resource.kind,
                              reason=reason, run_state=run.state.value, since=since,
                              detail=resource.detail, cost=cost))
    return sorted(found, key=lambda leak: (leak.since is None, leak.since or now, leak.subject))


def leak_suspected(runs: Iterable[RunFacts], now: datetime,
                   price_per_hour: PricePerHour | None = None) -> list[Condition]:
    """One ``leak_suspected`` condition per leaked resource (subject ``RUN_ID/RESOURCE_ID``)."""
    conditions = []
    for leak in leaks(runs, now, price_per_hour):
        why = ("no release report after the run was paused or cancelled"
               if leak.reason == "no_release_report"
               else f"the run is {leak.run_state} and still reports it held")
        backend, _, rest = leak.run_id.partition(":")
        conditions.append(Condition(
            kind=AlertKind.LEAK_SUSPECTED, subject=leak.subject, run=leak.run_id,
            detail=f"{leak.kind} {leak.resource_id}: {why}",
            action=f"irq release {leak.run_id} {leak.resource_id} --force",
            backend=backend, context=rest.split("/", 1)[0], since=leak.since,
            facts={"resource": leak.resource_id, "kind": leak.kind, "reason": leak.reason,
                   "cost": leak.cost}))
    return conditions


def held_too_long(runs: Iterable[RunFacts], paused_since: Mapping[str, datetime], now: datetime,
                  after: timedelta = DEFAULT_HELD_TOO_LONG,
                  price_per_hour: PricePerHour | None = None) -> list[Condition]:
    """A paused run keeping an ``on_pause = "keep"`` resource longer than ``after``: one
    condition per run (subject the run id), naming what it keeps. ``paused_since``: run id ->
    when it was paused (the pause ledger in the journal)."""
    conditions = []
    for run in runs:
        since = paused_since.get(run.id)
        if run.state is not RunState.PAUSED or since is None or now - since < after:
            continue
        kept = [r for r in run.resources if r.on_pause == "keep" and r.state == "held"]
        if not kept:
            continue
        hours = (now - since).total_seconds() / 3600.0
        prices = [price_per_hour(r.kind) for r in kept] if price_per_hour is not None else []
        cost = (round(sum(p for p in prices if p is not None) * hours, 2)
                if prices and any(p is not None for p in prices) else None)
        names = ", ".join(f"{r.kind} {r.id}" for r in kept)
        backend, _, rest = run.id.partition(":")
        conditions.append(Condition(
            kind=AlertKind.HELD_TOO_LONG, subject=run.id, run=run.id,
            detail=f"paused {hours:.1f}h keeping {names}"
            + (f" (about {cost:g} so far)" if cost is not None else ""),
            action=f"irq resume {run.id}, or cancel it to release what it keeps",
            backend=backend, context=rest.split("/", 1)[0], since=since,
            facts={"resources": [r.id for r in kept], "cost": cost}))
    return conditions
