"""What the Temporal adapter has seen of its namespace's workflows, shared by its parts.

The listing fills ``listed`` / ``closed``; describes fill ``described``, the heartbeat samples
and the heartbeat-loss facts; actions and decisions mark a run ``dirty`` (described first on
the next poll) and remember cancel requests; the observer builds runs from all of it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backend_adapters.temporal.state_mapping import ActivityView
from console.model import Heartbeat, Resource, utcnow


@dataclass
class Described:
    """The last describe of one workflow."""

    info: dict[str, Any]
    activities: list[ActivityView]
    observed_at: datetime
    observed_mono: float
    workflow_task_waiting_s: float | None = None
    #: pending child workflows and Nexus operations (work outside activities)
    other_pending: int = 0

    @property
    def idle(self) -> bool:
        """Nothing pending: no activity, child, Nexus operation or workflow task. A running
        workflow in this state is blocked in its own code (a timer, or a wait for outside)."""
        return (
            not self.activities and not self.other_pending and self.workflow_task_waiting_s is None
        )


@dataclass
class ObservedWorkflows:
    """Per-workflow facts, by workflow id."""

    listed: dict[str, dict[str, Any]] = field(default_factory=dict)
    closed: dict[str, dict[str, Any]] = field(default_factory=dict)
    described: dict[str, Described] = field(default_factory=dict)
    manifests: dict[str, list[Resource]] = field(default_factory=dict)
    #: history length when last asked, and the heartbeat loss found there (None: none)
    lost: dict[str, tuple[int, dict[str, Any] | None]] = field(default_factory=dict)
    cancel_requested: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)  # left the running list, fate unknown yet
    focus: set[str] = field(default_factory=set)
    dirty: set[str] = field(default_factory=set)
    samples: dict[str, deque[Heartbeat]] = field(default_factory=dict)
    stale_workers: dict[str, float] = field(default_factory=dict)
    listed_at: datetime = field(default_factory=utcnow)
    list_times: dict[str, datetime] = field(default_factory=dict)
    loss_unasked: set[str] = field(default_factory=set)  # activity vanished, history not read

    def mark_dirty(self, wid: str) -> None:
        self.dirty.add(wid)

    def forget(self, wid: str) -> None:
        self.listed.pop(wid, None)
        self.closed.pop(wid, None)
        self.described.pop(wid, None)
        self.manifests.pop(wid, None)
        self.lost.pop(wid, None)
        self.samples.pop(wid, None)


def workflow_id(info: dict[str, Any]) -> str:
    return str((info.get("execution") or {}).get("workflowId") or "")


def run_id_of(info: dict[str, Any]) -> str:
    return str((info.get("execution") or {}).get("runId") or "")


def is_older_run(info: dict[str, Any], than: dict[str, Any]) -> bool:
    """``info`` is an earlier run of the same workflow id than ``than`` (a reset or a
    continue-as-new started a newer one). Visibility lists every run of a workflow id; irq
    shows the newest, as ``describe`` without a run id does."""
    if run_id_of(info) == run_id_of(than) or not run_id_of(info) or not run_id_of(than):
        return False
    return str(info.get("startTime") or "") < str(than.get("startTime") or "")


def newest_runs(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One entry per workflow id: its newest run (whatever order the list came in)."""
    out: dict[str, dict[str, Any]] = {}
    for entry in entries:
        wid = workflow_id(entry)
        known = out.get(wid)
        if known is None or is_older_run(known, entry):
            out[wid] = entry
    return out
