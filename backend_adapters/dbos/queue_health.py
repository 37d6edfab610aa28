"""Alert facts a DBOS system database shows without any agent's help (dbos 3.4.0):
``no_workers`` for a queue whose work nobody takes, and a recovered workflow that has not
moved on since as ``retrying``.

**No workers.** DBOS keeps no executor heartbeats in the system database: a process that
listens on a queue leaves no row saying so. What the ``workflow_status`` table does show is
the queue itself: ``queue_name``, ``status`` (ENQUEUED until a process dequeues it, then
PENDING with ``executor_id`` and ``dequeued_at``), ``created_at``, ``delay_until_epoch_ms``.
Measured: a workflow enqueued with ``DBOSClient.enqueue`` on a queue no process registered
stays ENQUEUED (``executor_id`` null, ``dequeued_at`` null) however long it waits, while
another DBOS process on the same database listens to other queues; it was dequeued within a
second of a process registering the queue. So a queue has no workers when it holds ENQUEUED
work eligible (past its delay) for longer than ``threshold_s``, no PENDING workflow runs on
it, and nothing was dequeued from it within ``threshold_s``. A PENDING workflow counts as a
live consumer: the database cannot tell a slow step from a dead executor (heartbeats and
``lost`` cover that). A worker on another ``application_version`` does not dequeue the work
either (DBOS runs a workflow only on its own version): the condition names the versions.

**Retrying.** DBOS retries a step (``@DBOS.step(retries_allowed=True)``) inside the process
and records nothing per attempt: only a log line and an OpenTelemetry span event; the
``operation_outputs`` row is written once, with the final result or error. So irq cannot
show step attempts. What the table records is ``recovery_attempts``: each dispatch of the
workflow (its first run counts 1; every recovery after its executor stopped adds 1; DBOS
gives up past ``max_recovery_attempts``, 100 unless the workflow sets it, as
MAX_RECOVERY_ATTEMPTS_EXCEEDED). A recovered workflow is retrying in DBOS's sense only
until it gets past the point where its executor stopped: :func:`recovery_retry` reports a
PENDING workflow on its second dispatch or later as ``Run.retrying`` while no operation of
it was journaled after its latest dispatch, and while it is not parked in a recv. Without
that, one restart (a deploy) would leave every long-running workflow ``retrying`` for the
rest of its life.

Measured (dbos 3.4.0, SQLite, a worker SIGKILLed mid-step and started again): the
dispatch time is ``workflow_status.started_at_epoch_ms`` (``WorkflowStatus.dequeued_at``):
recovery re-enqueues the row (ENQUEUED, ``started_at_epoch_ms`` null) and the dequeue sets
it to the database's clock in the same statement that adds 1 to ``recovery_attempts``
(second precision on SQLite under Python < 3.12: floored). ``updated_at`` is no dispatch
time: it also moves on every attribute write (irq's step markers, twice a step) and on the
re-enqueue. ``operation_outputs`` holds one row per journaled operation, written when it
completes (none for the step in flight), ``started_at_epoch_ms`` and
``completed_at_epoch_ms`` from the worker's clock; replayed steps write nothing and
attribute writes (through a DBOSClient) add no rows. So "a row started at or after the
dispatch" (:func:`~backend_adapters.dbos.system_tables.stepped_since_dispatch`, one
statement per poll for the recovered PENDING workflows only) is progress since the
recovery, with no state kept across polls or restarts of irq. Comparing a row's start,
not its completion, with the floored dispatch time keeps a step that completed before the
crash from counting (only a step started within the second before a restart that
recovered it at once could). The two clocks differ on PostgreSQL: a database clock ahead
of the workers' delays the clearing by that much; one behind them by more than a restart
takes could count a step started before the crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dbos import WorkflowStatus

from console.alert_model import AlertKind, Condition
from console.run_facts import StepRetry

#: how long eligible ENQUEUED work may wait with nothing dequeued before the queue is said to
#: have no workers (DBOS polls its queues every second by default)
NO_WORKERS_S = 30.0
#: what DBOS uses when a workflow does not set ``max_recovery_attempts`` (dbos 3.4.0)
DEFAULT_MAX_RECOVERY_ATTEMPTS = 100


def _at(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


def recovered(status: WorkflowStatus) -> bool:
    """PENDING on its second dispatch or later: DBOS recovered it after its executor
    stopped (the only runs whose journal :func:`recovery_retry` needs read)."""
    return status.status == "PENDING" and (status.recovery_attempts or 0) >= 2


def recovery_retry(
    status: WorkflowStatus, *, stepped: bool = False, waiting: bool = False
) -> StepRetry | None:
    """A PENDING workflow that DBOS has dispatched more than once (recovered after its
    executor stopped) and that has not moved on since its latest dispatch, as a
    :class:`StepRetry`; None otherwise. ``stepped``: an operation of it was journaled after
    that dispatch; ``waiting``: it is parked in a recv (re-entered on replay: nothing to
    re-run, it waits for a message)."""
    if not recovered(status) or stepped or waiting:
        return None
    attempts = status.recovery_attempts or 0
    dispatched = _at(status.dequeued_at)
    since = (
        f"no step completed since its latest dispatch at "
        f"{dispatched.isoformat(timespec='seconds')}"
        if dispatched
        else "no dispatch time recorded, so progress since is unknown"
    )
    return StepRetry(
        step=str(status.name or "workflow"),
        attempt=attempts,
        last_error=(
            f"recovered {attempts - 1} time(s) after its executor stopped (crash, restart or "
            f"a hung process); {since}; DBOS re-runs it from its last journaled step and "
            f"gives up past max_recovery_attempts ({DEFAULT_MAX_RECOVERY_ATTEMPTS} unless the "
            "workflow sets it)"
        ),
    )


@dataclass
class _Queue:
    enqueued: list[WorkflowStatus] = field(default_factory=list)
    pending: int = 0


@dataclass
class QueueHealth:
    """Watches the queues of one system database across polls (it remembers when each
    queue last made progress, since finished workflows leave the active set)."""

    context: str
    threshold_s: float = NO_WORKERS_S
    _progress_ms: dict[str, int] = field(default_factory=dict)

    def subject(self, queue: str) -> str:
        return f"dbos:{self.context}/queue/{queue}"

    def _moved(self, queue: str, ms: int | None) -> None:
        if ms and ms > self._progress_ms.get(queue, 0):
            self._progress_ms[queue] = ms

    def conditions(
        self, statuses: Iterable[WorkflowStatus], *, now_ms: int | None = None
    ) -> list[Condition]:
        """``no_workers`` conditions from one poll's workflows (the active set, plus any
        finished ones the poll read: their ``dequeued_at`` is progress too)."""
        now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
        queues: dict[str, _Queue] = {}
        for status in statuses:
            name = status.queue_name
            if not name:
                continue
            queue = queues.setdefault(name, _Queue())
            self._moved(name, status.dequeued_at)
            if status.status == "PENDING":
                queue.pending += 1
                self._moved(name, now)
            elif status.status == "ENQUEUED":
                queue.enqueued.append(status)
        limit = now - int(self.threshold_s * 1000)
        out = []
        for name, queue in sorted(queues.items()):
            waiting = [s for s in queue.enqueued if _eligible_ms(s) <= limit]
            if not waiting or queue.pending or self._progress_ms.get(name, 0) > limit:
                continue
            out.append(self._no_workers(name, waiting, now))
        return out

    def _no_workers(self, queue: str, waiting: list[WorkflowStatus], now: int) -> Condition:
        oldest = min(waiting, key=_eligible_ms)
        since_ms = max(_eligible_ms(oldest), self._progress_ms.get(queue, 0))
        versions = sorted({str(s.app_version) for s in waiting if s.app_version})
        last = self._progress_ms.get(queue)
        moved = (
            f"last dequeue {round((now - last) / 1000)}s ago" if last else "nothing dequeued yet"
        )
        version_text = f" on application_version {', '.join(versions)}" if versions else ""
        return Condition(
            kind=AlertKind.NO_WORKERS,
            subject=self.subject(queue),
            detail=(
                f"queue {queue}: {len(waiting)} workflow(s) enqueued and not taken, oldest "
                f"{oldest.workflow_id} waiting {round((now - _eligible_ms(oldest)) / 1000)}s; "
                f"none running, {moved}: no executor seems to listen on it (DBOS keeps no "
                "executor heartbeats; judged from the queue)"
            ),
            action=(
                f"start a DBOS process that registers queue {queue}{version_text} "
                "(a worker on another application_version does not dequeue this work)"
            ),
            backend="dbos",
            context=self.context,
            since=_at(since_ms),
            facts={
                "queue": queue,
                "enqueued": len(waiting),
                "oldest_workflow": oldest.workflow_id,
                "app_versions": versions,
            },
        )


def _eligible_ms(status: WorkflowStatus) -> int:
    """When an enqueued workflow could first be dequeued: its creation, or its delay's end."""
    return max(status.created_at or 0, status.delay_until_epoch_ms or 0)
