"""The liveness clock: silence turns a run ``late`` and then ``lost`` without any event from
the agent.

Liveness is re-evaluated only for runs whose late/lost deadline has come (a wheel of
100 ms slots, :class:`LivenessWheel`), not for every run every second, and within a budget of
wall time per tick (:data:`TICK_BUDGET_S`): an overloaded gateway judges the rest at its next
tick, in deadline order, and says how many wait (``backlog``); a beat read meanwhile spares
the run a flip to late and back. The run store files runs in the wheel as it changes them;
the clock is a loop of its own that reads the wheel and asks the store for the flips.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from console.gateway.run_contracts import copy_run
from console.liveness import live_for, lost_after
from console.model import RunState
from console.run_record import RunFacts, RunRecord
from console.semantics import LIVE_STATES, unified_state

if TYPE_CHECKING:
    from console.gateway.run_store import RunStore

WHEEL_SLOTS_PER_S = 10  # the liveness wheel's resolution
#: wall time one tick may spend judging silence; what is left waits for the next tick, in
#: deadline order (a gateway behind on its beats would else judge runs late whose next beat
#: it has not read yet, and every such flip is undone by that beat: twice the work of a beat,
#: just when it is behind)
TICK_BUDGET_S = 0.05


class LivenessWheel:
    """Runs filed under the slot (100 ms) at which silence could next change their state."""

    def __init__(self) -> None:
        self.due: dict[int, set[str]] = {}  # 100 ms slot -> runs whose liveness may change
        self.due_of: dict[str, int] = {}

    def schedule(self, run: RunFacts, not_before: int | None = None) -> None:
        """File ``run`` under the slot its silence could next change its state."""
        due = liveness_due(run)
        if due is not None and not_before is not None and due < not_before:
            due = not_before  # judged at a fixed time (observed_at): look again later
        self.move(run.id, due)

    def move(self, run_id: str, due: int | None) -> None:
        """File ``run_id`` under slot ``due`` (None: under none)."""
        old = self.due_of.get(run_id)
        if old == due:
            return
        if old is not None:
            bucket = self.due.get(old)
            if bucket is not None:
                bucket.discard(run_id)
                if not bucket:
                    del self.due[old]
        if due is None:
            self.due_of.pop(run_id, None)
            return
        self.due_of[run_id] = due
        bucket = self.due.get(due)
        if bucket is None:
            bucket = self.due[due] = set()
        bucket.add(run_id)

    def unschedule(self, run_id: str) -> None:
        old = self.due_of.pop(run_id, None)
        if old is not None and old in self.due:
            self.due[old].discard(run_id)
            if not self.due[old]:
                del self.due[old]


class LivenessClock:
    """Each tick: judge the silence of the runs whose slot has come, within the budget."""

    def __init__(self, wheel: LivenessWheel, store: RunStore, *,
                 budget_s: float = TICK_BUDGET_S) -> None:
        self.wheel = wheel
        self.store = store
        self.budget_s = budget_s
        #: runs whose silence deadline has passed but were not judged yet (the tick's budget
        #: ran out): 0 unless the gateway is overloaded
        self.backlog = 0

    def judge_due(self, now: datetime) -> None:
        slot = math.floor(now.timestamp() * WHEEL_SLOTS_PER_S)
        due_at = self.wheel.due
        overdue = sorted(d for d in due_at if d <= slot)
        budget_end = time.perf_counter() + self.budget_s
        judged = 0  # the budget is looked at every 64 runs
        self.backlog = 0
        runs = self.store.runs
        for k, due in enumerate(overdue):
            bucket = list(due_at.pop(due))
            for n, run_id in enumerate(bucket):
                judged += 1
                if judged % 64 == 0 and time.perf_counter() > budget_end:
                    due_at.setdefault(due, set()).update(bucket[n:])  # the next tick's
                    self.backlog = sum(len(due_at.get(d, ())) for d in overdue[k:])
                    break
                self.wheel.due_of.pop(run_id, None)
                run = runs.get(run_id)
                if run is None:
                    continue
                # silence alone moves running -> late -> lost; refresh only where that happens
                if run.heartbeat_at is not None and unified_state(run, now) is not run.state:
                    if not self._silence(run_id, run, now, slot):
                        self.store.refresh(run_id, now)
                else:
                    self.wheel.schedule(run, not_before=slot + 1)
            if self.backlog:
                break

    def _silence(self, run_id: str, run: RunRecord, now: datetime, slot: int) -> bool:
        """Silence changed ``run``'s state (late, lost): nothing else changed since its last
        merge, so the merged run is the current one with the state the merge would judge
        now (from the adapter's state, as the merge does). False: the full merge is needed
        (a release check decides the state)."""
        observed = self.store.observed.get(run_id)
        if observed is None or run_id in self.store.releases.checks:
            return False
        state = run.state
        run.state = observed.state
        try:
            new_state = unified_state(run, now)
        finally:
            run.state = state
        if new_state is state:
            self.wheel.schedule(run, not_before=slot + 1)
            return True
        new = copy_run(run, {"state": new_state, "updated_at": now})
        if new_state.terminal or state.terminal:  # else the same facts, the same warnings
            new.warnings = self.store.warnings(observed.warnings, new)
        self.store.install(new, now, run)
        self.store.publish(new)
        return True


def liveness_due(run: RunFacts) -> int | None:
    """The wheel slot (epoch tenths of a second) at which silence could next change
    ``run``'s state: late after the cadence plus a margin, lost after the timeout
    (console.liveness); None: never."""
    interval, at = run.heartbeat_interval_s, run.heartbeat_at
    if at is None or not interval or interval <= 0 or run.state not in LIVE_STATES:
        return None
    if run.state is RunState.LOST:
        return None
    timeout = run.heartbeat_timeout_s
    after = (lost_after(interval, timeout) if run.state is RunState.LATE
             else live_for(interval, timeout))
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return math.floor((at.timestamp() + after) * WHEEL_SLOTS_PER_S)


def fresh_due(at: datetime, now: datetime, interval: float | None,
              timeout: float | None) -> int | None:
    """For a run its adapter reports running that beat at ``at`` (aware): the wheel slot at
    which its silence could next change its state, when that beat leaves it live at ``now``
    (liveness ``running``: :func:`console.liveness.classify_liveness`); None when it does
    not, or has no cadence (judge it with ``unified_state``). :func:`liveness_due` and the
    classification in one step, for the beat fast path."""
    if not interval or interval <= 0:
        return None
    after = live_for(interval, timeout)
    if (now - at).total_seconds() > after:
        return None
    return math.floor((at.timestamp() + after) * WHEEL_SLOTS_PER_S)
