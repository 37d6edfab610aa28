"""Work at risk: what an action throws away on a run (DESIGN.md §1, "Work at risk").

Pure (no I/O, no clock but the ``now`` passed in). Per run:

- **minutes**: from the last journaled step (``Run.last_step_at``, which adapters fill; else
  the latest completed step of a journal the caller read; else ``Run.started_at``) to
  ``now`` -- or, for a run that already ended (failed, cancelled), to when it ended (its
  error's time, else its last update): the work after the last step is what runs again.
- **GPU units held**: the run's resources not released whose kind is ``gpu``; each counts
  ``count=N`` (or ``size=N``) when its ``detail`` says so (``"count=4 A100"``), else 1.
- **GPU-minutes** = minutes x GPU units.
- **cost** = minutes / 60 x the price per hour of each held resource's kind x its units, when
  the price table (console/prices.py) has a price for at least one of them (else None).
- **snapshot**: held resources declared ``on_pause = "snapshot"``: their state is saved on
  pause and restored on resume (a sandbox, a KV cache); a pause keeps them.

Every plan that throws work away carries it (``ActionPlan.work_at_risk``): the gateway's
run actions (console/gateway/run_actions.py) and the retry plan call
:func:`with_work_at_risk`; ``irq drill`` calls :func:`work_at_risk` per target.
:func:`describe` is the one wording the CLI, the TUI and the drill show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from console.model import TERMINAL_STATES, Action, ActionPlan, JournalStep, Resource
from console.prices import PriceTable
from console.run_facts import WorkAtRisk
from console.run_record import RunFacts

GPU_KIND = "gpu"

#: actions whose plan shows the work at risk: cancel and terminate end the run, retry runs
#: the work after the last good step again, a pause re-runs the step in flight on resume
#: (a preemption is not an action: ``irq drill`` shows the same figures before it preempts)
AT_RISK_ACTIONS = frozenset({Action.CANCEL, Action.TERMINATE, Action.RETRY, Action.PAUSE})

#: ``count=4`` / ``size: 2`` / ``gpus=8`` in a resource's detail: how many units it is
_UNITS = re.compile(r"(?:^|[\s,;(])(?:count|size|gpus)\s*[=:]\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def units_of(resource: Resource) -> float:
    """How many units ``resource`` is: ``count=N`` / ``size=N`` in its detail, else 1."""
    found = _UNITS.search(resource.detail)
    return float(found.group(1)) if found else 1.0


def _held(run: RunFacts) -> list[Resource]:
    return [r for r in run.resources if r.state != "released"]


def counted_from(run: RunFacts, steps: Sequence[JournalStep] = ()) -> tuple[datetime | None, str]:
    """Where the minutes count from, and what that is ("last_step" | "start" | "")."""
    if run.last_step_at is not None:
        return run.last_step_at, "last_step"
    done = [s.completed_at for s in steps if s.status == "completed" and s.completed_at]
    if done:
        return max(done), "last_step"
    if run.started_at is not None:
        return run.started_at, "start"
    return None, ""


def _ended_at(run: RunFacts, now: datetime) -> datetime:
    """The clock stops when the run ended: the work after its last step is already lost
    and runs again on a retry; it does not grow while the run sits failed."""
    if run.state in TERMINAL_STATES:
        return run.error.at if run.error is not None and run.error.at else run.updated_at
    return now


def work_at_risk(run: RunFacts, now: datetime, prices: PriceTable | None = None,
                 steps: Sequence[JournalStep] = ()) -> WorkAtRisk:
    """The work at risk on ``run`` at ``now`` (see the module's docstring for each figure)."""
    since, origin = counted_from(run, steps)
    seconds = (_ended_at(run, now) - since).total_seconds() if since is not None else 0.0
    minutes = round(max(0.0, seconds) / 60.0, 2)
    held = _held(run)
    gpus = sum(units_of(r) for r in held if r.kind == GPU_KIND)
    cost: float | None = None
    if prices:
        priced = [(r, prices.price_of(r.kind)) for r in held]
        known = [(r, p) for r, p in priced if p is not None]
        if known:
            cost = round(sum(minutes / 60.0 * p * units_of(r) for r, p in known), 4)
    return WorkAtRisk(
        run_id=run.id, minutes=minutes, gpu_minutes=round(minutes * gpus, 2), cost=cost,
        currency=prices.currency if prices else "", gpus=gpus, since=since,
        counted_from=origin, snapshot=[r.id for r in held if r.on_pause == "snapshot"])


def with_work_at_risk(plan: ActionPlan, runs: Iterable[RunFacts], now: datetime,
                      prices: PriceTable | None = None,
                      steps: Mapping[str, Sequence[JournalStep]] | None = None) -> ActionPlan:
    """``plan`` with the work at risk of each of its targets among ``runs`` (for an action
    in :data:`AT_RISK_ACTIONS`; other plans are returned as they are). ``steps``: journals
    the caller already read, by run id (the fallback when a run has no ``last_step_at``).

    The gateway's run actions and the retry plan call this on the plan they built."""
    if plan.action not in AT_RISK_ACTIONS:
        return plan
    targets = set(plan.targets)
    plan.work_at_risk = [
        work_at_risk(run, now, prices, (steps or {}).get(run.id, ()))
        for run in runs if run.id in targets
    ]
    return plan


def _amount(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def money(amount: float, currency: str) -> str:
    return PriceTable(currency=currency or "USD").money(amount)


def describe(risk: WorkAtRisk, action: Action | None = None) -> str:
    """``42 min since the last step × 2 gpu = 84 GPU-min ($3.50)`` (the "work at risk:"
    label is the caller's: a table cell, a plan line)."""
    origin = {"last_step": "since the last step", "start": "since the start"}.get(
        risk.counted_from, "(no step or start time known)")
    text = f"{_amount(risk.minutes)} min {origin}"
    if risk.gpus:
        text += f" × {risk.gpus:g} {GPU_KIND} = {_amount(risk.gpu_minutes)} GPU-min"
    if risk.cost is not None:
        text += f" ({money(risk.cost, risk.currency)})"
    return text


def snapshot_note(risk: WorkAtRisk) -> str | None:
    """``sandbox-1, kv-0: saved on pause, restored on resume`` (None: no such resource)."""
    if not risk.snapshot:
        return None
    return f"{', '.join(risk.snapshot)}: saved on pause, restored on resume"


def cost_rate(run: RunFacts, prices: PriceTable | None) -> float:
    """What the resources ``run`` holds cost per hour (0 with no prices); with no price
    table, its GPU units, so the cost sort still puts the heaviest runs first."""
    held = _held(run)
    if not prices:
        return sum(units_of(r) for r in held if r.kind == GPU_KIND)
    return sum((prices.price_of(r.kind) or 0.0) * units_of(r) for r in held)
