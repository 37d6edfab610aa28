"""What a preemption drill observed about one run, and whether it recovered cleanly.

Pure: :func:`evaluate` turns an :class:`Observation` (times seen through the gateway, the
run's journal and resources before the preemption and after recovery) into a
:class:`DrillResult`, the row of ``irq drill``'s report and its JSON.

A run recovered *cleanly* when
- the preemption command succeeded and the run came back: running again with a heartbeat
  newer than the preemption, or completed;
- no completed step ran again: only the step in flight when it was preempted may re-run. A
  completed step re-ran when its journal entry changed (other start or completion time) or
  when a step of the same name appears again after the preemption (names a run repeats by
  design, such as a loop's ``wait for decision``, appear more than once before the
  preemption and are not counted);
- every resource it held is held again (an at-least-once agent re-acquires on restart),
  none is a suspected leak; a completed run holds none it should have released.

Measured besides: the work at risk when it was preempted (console/work_at_risk.py: minutes
since its last step x GPUs, money with the gateway's prices) and, for resources declared
``on_pause = "snapshot"``, the restore: seconds from the recovery to the agent reporting
every one of them held again (``restore_after_s``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from console.model import JournalStep, Resource
from console.run_facts import WorkAtRisk

FIELDS = (
    "run_id",
    "backend",
    "preempted_at",
    "late_after_s",
    "lost_after_s",
    "recovered_after_s",
    "rerun_steps",
    "completed_steps_rerun",
    "resources_ok",
    "clean",
    "detail",
    "work_at_risk",
    "snapshot_resources",
    "restore_after_s",
)


@dataclass(frozen=True)
class Observation:
    run_id: str
    backend: str
    preempted_at: datetime
    journal_before: list[JournalStep]
    resources_before: list[Resource]
    late_at: datetime | None = None
    lost_at: datetime | None = None  # lost, or the backend's own preempted / retry state
    recovered_at: datetime | None = None
    recovered_state: str | None = None  # "running" | "completed"
    journal_after: list[JournalStep] = field(default_factory=list)
    resources_after: list[Resource] = field(default_factory=list)
    preempt_error: str | None = None  # the preempt command failed: nothing was observed
    timed_out: bool = False
    work_at_risk: WorkAtRisk | None = None  # when it was preempted
    #: snapshot resources all reported held again (None: not yet, or none to restore)
    restored_at: datetime | None = None


@dataclass(frozen=True)
class DrillResult:
    run_id: str
    backend: str
    preempted_at: str
    late_after_s: float | None
    lost_after_s: float | None
    recovered_after_s: float | None
    rerun_steps: list[str]
    completed_steps_rerun: list[str]
    resources_ok: bool
    clean: bool
    detail: str
    work_at_risk: dict[str, Any] | None = None  # WorkAtRisk.contract() at the preemption
    snapshot_resources: list[str] = field(default_factory=list)  # on_pause = "snapshot"
    restore_after_s: float | None = None  # from the recovery to them held again

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reruns:
    rerun: list[str]  # every step that ran again (the in-flight one included)
    completed: list[str]  # completed steps among them: never allowed


def _since(start: datetime, at: datetime | None) -> float | None:
    return None if at is None else round(max(0.0, (at - start).total_seconds()), 3)


def compare_journals(before: list[JournalStep], after: list[JournalStep]) -> Reruns:
    """Which steps ran again between two reads of one run's journal."""
    completed_before = {s.index: s for s in before if s.status == "completed"}
    in_flight = {s.name for s in before if s.status == "in_flight"}
    once = {name for name, n in Counter(s.name for s in before).items() if n == 1}
    completed_names = {s.name for s in completed_before.values()} & once
    rerun: list[str] = []
    completed: list[str] = []
    for step in after:
        was = completed_before.get(step.index)
        if was is not None:
            changed = (was.started_at, was.completed_at) != (step.started_at, step.completed_at)
            if step.name == was.name and changed and was.completed_at is not None:
                rerun.append(step.name)
                completed.append(step.name)
            continue
        if step.name in in_flight:
            rerun.append(step.name)
        elif step.name in completed_names:
            rerun.append(step.name)
            completed.append(step.name)
    return Reruns(sorted(set(rerun)), sorted(set(completed)))


def check_resources(
    before: list[Resource], after: list[Resource], recovered_state: str | None
) -> tuple[bool, list[str]]:
    """Whether the resources after recovery are what the run's policy says, and why not."""
    problems = [f"{r.id} suspected leak" for r in after if r.state == "suspected_leak"]
    now = {r.id: r for r in after}
    if recovered_state == "running":
        for r in before:
            if r.state != "held":
                continue
            again = now.get(r.id)
            if again is None or again.state != "held":
                state = again.state if again is not None else "gone"
                problems.append(f"{r.id} not held again after recovery ({state})")
    elif recovered_state == "completed":
        for r in after:
            if r.on_cancel == "release" and r.state == "held":
                problems.append(f"{r.id} still held after completion")
    return not problems, problems


def evaluate(obs: Observation) -> DrillResult:
    """The report row for one run."""
    start = obs.preempted_at
    snapshot = [r.id for r in obs.resources_before
                if r.on_pause == "snapshot" and r.state == "held"]
    base: dict[str, Any] = {
        "run_id": obs.run_id,
        "backend": obs.backend,
        "preempted_at": start.isoformat(),
        "work_at_risk": obs.work_at_risk.contract() if obs.work_at_risk else None,
        "snapshot_resources": snapshot,
    }
    if obs.preempt_error is not None:
        return DrillResult(**base, late_after_s=None, lost_after_s=None,
                           recovered_after_s=None, rerun_steps=[], completed_steps_rerun=[],
                           resources_ok=False, clean=False,
                           detail=f"preempt command failed: {obs.preempt_error}")
    recovered = obs.recovered_at is not None and obs.recovered_state in ("running", "completed")
    reruns = compare_journals(obs.journal_before, obs.journal_after) if recovered else Reruns(
        [], []
    )
    resources_ok, problems = (
        check_resources(obs.resources_before, obs.resources_after, obs.recovered_state)
        if recovered
        else (False, [])
    )
    notes: list[str] = []
    if not recovered:
        notes.append("timed out: did not recover" if obs.timed_out else "did not recover")
    else:
        notes.append(f"recovered ({obs.recovered_state})")
    if reruns.completed:
        notes.append("completed step(s) ran again: " + ", ".join(reruns.completed))
    allowed = [s for s in reruns.rerun if s not in reruns.completed]
    if allowed:
        notes.append("in-flight step re-ran: " + ", ".join(allowed))
    notes.extend(problems)
    restore = (_since(obs.recovered_at, obs.restored_at)
               if obs.recovered_at is not None and snapshot else None)
    if restore is not None:
        notes.append(f"snapshot restored in {restore:.1f}s: {', '.join(snapshot)}")
    clean = recovered and not reruns.completed and resources_ok
    return DrillResult(
        **base,
        late_after_s=_since(start, obs.late_at),
        lost_after_s=_since(start, obs.lost_at),
        recovered_after_s=_since(start, obs.recovered_at),
        rerun_steps=reruns.rerun,
        completed_steps_rerun=reruns.completed,
        resources_ok=resources_ok,
        clean=clean,
        detail="; ".join(notes),
        restore_after_s=restore,
    )
