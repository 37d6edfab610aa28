"""Agent-side helpers for Temporal: raise interrupts, report resources, handle pause vs cancel.

Workflow side (deterministic, runs in the workflow sandbox)::

    @workflow.defn
    class Agent:
        @workflow.init
        def __init__(self, task: dict) -> None:
            self.irq = Interrupts()  # registers irq's query + update handlers

        @workflow.run
        async def run(self, task: dict) -> dict:
            decision = await self.irq.ask("Deploy?", action="deploy", args={"env": "prod"},
                                          allowed=("approve", "edit", "reject"))
            if decision.kind == "reject":
                return {"skipped": decision.feedback}
            return await run_activity(train, decision.final_args({"env": "prod"}),
                                      heartbeat_timeout_s=5)

Activity side::

    @activity.defn
    async def train(args: dict) -> dict:
        resources = [HeldResource("gpu:0", kind="gpu", on_pause="keep"),
                     HeldResource("lock:/data", kind="lock", on_pause="release",
                                  acquire=take_lock, release=drop_lock)]
        async with AgentActivity(resources) as agent:
            step = agent.resumed_progress.get("step", 0)
            while step < 100:
                await do_step(step)
                step += 1
                agent.beat(step=step, total=100)
        return agent.result()

Worker::

    Worker(client, task_queue="agents", workflows=[...], activities=[...], **worker_options())

The conventions themselves (names, payload shapes) live in ``conventions.py``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from temporalio import activity, workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import CancelledError as TemporalCancelledError
from temporalio.workflow import ActivityCancellationType

from backend_adapters.agent_resources import ResourceEntry, resource_entry
from backend_adapters.interrupt_deadline import Deadline, deadline_delta
from backend_adapters.run_records import interrupt_payload
from backend_adapters.temporal.conventions import (
    DECISION_KINDS,
    ERROR_ACTIVITY_CANCELLED,
    ERROR_INVALID_DECISION,
    ERROR_NOT_PENDING,
    HEARTBEAT_MARKER,
    MEMO_KEY,
    QUERY_NAME,
    REPORT_MEMO_KEY,
    SEARCH_ATTRIBUTE,
    UPDATE_NAME,
    heartbeat_details,
)

with workflow.unsafe.imports_passed_through():
    from console.decision_check import decision_problem, schema_problem

PENDING_KEY = SearchAttributeKey.for_keyword_list(SEARCH_ATTRIBUTE)

# ============================================================================ workflow side


@dataclass(frozen=True)
class DecisionReceived:
    """A decision delivered to the workflow through the ``irq_decide`` update."""

    interrupt_id: str
    kind: str  # approve | edit | reject | respond
    by: str
    update_id: str
    at: str
    args: dict[str, Any] | None = None
    feedback: str | None = None
    response: Any = None

    def final_args(self, proposed: dict[str, Any]) -> dict[str, Any]:
        """The arguments to run with: the edited ones for ``edit``, else ``proposed``."""
        return dict(self.args) if self.kind == "edit" and self.args is not None else proposed


class Interrupts:
    """irq's interrupt conventions inside one workflow.

    Create it once, inside workflow code (``@workflow.init`` or the start of ``run``): it
    registers the query ``irq_pending_interrupts`` and the update ``irq_decide`` (with a
    validator), and keeps the search attribute ``IrqPendingInterrupts`` and the memo key
    ``irq_interrupts`` in step with the pending interrupts.

    ``search_attribute=False`` skips the search attribute (for servers where it is not
    registered; the console then finds waiting runs from the memo of each listed run).
    """

    def __init__(self, *, search_attribute: bool = True) -> None:
        self._pending: dict[str, dict[str, Any]] = {}
        self._decided: dict[str, DecisionReceived] = {}
        self._withdrawn: set[str] = set()
        self._counter = 0
        self._search_attribute = search_attribute
        #: tool calls made through ``policy_tools.guarded_tool`` (the deterministic call id)
        self.tool_calls = 0
        #: ids of the obligations those calls opened (``policy_tools.fulfil_obligation``)
        self.obligations: list[str] = []
        #: every decision the handler accepted, in order (exactly once per interrupt)
        self.delivered: list[DecisionReceived] = []
        workflow.set_query_handler(QUERY_NAME, self.pending)
        workflow.set_update_handler(UPDATE_NAME, self._on_decide, validator=self._validate)

    # ------------------------------------------------------------------ raising interrupts

    async def ask(
        self,
        title: str,
        *,
        action: str = "",
        args: dict[str, Any] | None = None,
        args_schema: dict[str, Any] | None = None,
        description: str = "",
        allowed: Iterable[str] = ("approve", "edit", "reject", "respond"),
        interrupt_id: str | None = None,
        timeout: timedelta | None = None,
        policy: dict[str, Any] | None = None,
        deadline: Deadline | None = None,
    ) -> DecisionReceived:
        """Raise an interrupt and wait for its decision.

        On ``timeout`` the interrupt is withdrawn and ``asyncio.TimeoutError`` is raised.
        ``policy`` (the rule that asked for the approval: ``rule``, ``why``, ``decide_role``,
        ``approvers``, ``policy_version``) is published with the interrupt. ``deadline`` (a
        timedelta or seconds) publishes ``deadline_at`` = ``workflow.now()`` + deadline
        (deterministic): past it irq raises ``interrupt_overdue``; the workflow keeps waiting.
        """
        delta = deadline_delta(deadline)
        allowed_list = [d for d in allowed if d in DECISION_KINDS]
        if not allowed_list:
            raise ValueError(f"allowed decisions must be among {DECISION_KINDS}")
        if args_schema is not None:
            problem = schema_problem(args_schema)
            if problem is not None:
                raise ValueError(f"{title!r}: {problem}")
        self._counter += 1
        iid = interrupt_id or f"i{self._counter}"
        if iid in self._pending or iid in self._decided:
            raise ValueError(f"interrupt id {iid!r} already used in this workflow")
        self._pending[iid] = dict(
            interrupt_payload(
                iid,
                title,
                description=description,
                action=action,
                args=args,
                args_schema=args_schema,
                allowed_decisions=allowed_list,
                created_at=workflow.now().astimezone(UTC),  # deterministic on replay
                policy=policy,
                deadline=delta,
            )
        )
        self._publish()
        try:
            await workflow.wait_condition(lambda: iid in self._decided, timeout=timeout)
        except TimeoutError:
            self._pending.pop(iid, None)
            self._withdrawn.add(iid)
            self._publish()
            raise
        return self._decided[iid]

    def pending(self) -> list[dict[str, Any]]:
        """The query handler: pending interrupts in the common shape, oldest first."""
        return [dict(p) for p in self._pending.values()]

    # ------------------------------------------------------------------ decisions (update)

    def _validate(self, request: dict[str, Any]) -> None:
        iid = request.get("interrupt_id") if isinstance(request, dict) else None
        pending = self._pending.get(iid) if isinstance(iid, str) else None
        if pending is None:
            raise ApplicationError(
                f"interrupt {iid!r} is not pending ({self._why_not_pending(iid)})",
                type=ERROR_NOT_PENDING,
                non_retryable=True,
            )
        decision = request.get("decision")
        if not isinstance(decision, dict):
            raise ApplicationError("decision must be an object", type=ERROR_INVALID_DECISION)
        problem = decision_problem(
            str(decision.get("type")),
            pending["allowed_decisions"],
            args=decision.get("args"),
            schema=pending.get("args_schema"),
        )
        if problem is not None:
            raise ApplicationError(
                f"decision refused for {iid!r}: {problem}",
                type=ERROR_INVALID_DECISION,
                non_retryable=True,
            )

    def _on_decide(self, request: dict[str, Any]) -> dict[str, Any]:
        # Validators of two updates in the same workflow task both pass before either handler
        # runs: validate again here, synchronously, so only the first one applies.
        self._validate(request)
        iid: str = request["interrupt_id"]
        decision: dict[str, Any] = request["decision"]
        info = workflow.current_update_info()
        received = DecisionReceived(
            interrupt_id=iid,
            kind=decision["type"],
            by=str(request.get("by") or ""),
            update_id=info.id if info else str(request.get("idempotency_key") or ""),
            at=workflow.now().astimezone(UTC).isoformat(),
            args=decision.get("args"),
            feedback=decision.get("feedback"),
            response=decision.get("response"),
        )
        del self._pending[iid]
        self._decided[iid] = received
        self.delivered.append(received)
        self._publish()
        return {"interrupt_id": iid, "decision": received.kind, "applied_at": received.at}

    def _why_not_pending(self, iid: object) -> str:
        if isinstance(iid, str) and iid in self._decided:
            d = self._decided[iid]
            return f"already decided: {d.kind} by {d.by or 'unknown'}"
        if isinstance(iid, str) and iid in self._withdrawn:
            return "withdrawn: the workflow stopped waiting"
        return "unknown interrupt id"

    def _publish(self) -> None:
        ids = sorted(self._pending)
        if self._search_attribute:
            update = PENDING_KEY.value_set(ids) if ids else PENDING_KEY.value_unset()
            workflow.upsert_search_attributes([update])
        workflow.upsert_memo({MEMO_KEY: self.pending() if ids else None})


def activity_options(
    *,
    heartbeat_timeout_s: float = 10.0,
    start_to_close_s: float = 3600.0,
    maximum_attempts: int = 0,
) -> dict[str, Any]:
    """``workflow.execute_activity`` keyword arguments for a pausable, cancellable activity.

    A heartbeat timeout is what lets pause and cancel reach a running attempt, and lets the
    server notice a dead worker; ``WAIT_CANCELLATION_COMPLETED`` makes a workflow cancel wait
    until the activity has released its resources.
    """
    from temporalio.common import RetryPolicy

    return {
        "heartbeat_timeout": timedelta(seconds=heartbeat_timeout_s),
        "start_to_close_timeout": timedelta(seconds=start_to_close_s),
        "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        "retry_policy": RetryPolicy(maximum_attempts=maximum_attempts),
    }


async def run_activity(
    activity_fn: Callable[..., Any],
    arg: Any,
    *,
    heartbeat_timeout_s: float = 10.0,
    start_to_close_s: float = 3600.0,
    maximum_attempts: int = 0,
    **options: Any,
) -> Any:
    """``workflow.execute_activity`` for an :class:`AgentActivity`, keeping irq's report.

    Uses :func:`activity_options`; publishes the activity's final report (what it kept and
    released) in the memo key ``irq_report``; turns the ``IrqActivityCancelled`` failure of
    an activity that cleaned up after a cancel request back into a cancellation, so the
    workflow closes CANCELED.
    """
    opts = {
        **activity_options(
            heartbeat_timeout_s=heartbeat_timeout_s,
            start_to_close_s=start_to_close_s,
            maximum_attempts=maximum_attempts,
        ),
        **options,
    }
    try:
        result = await workflow.execute_activity(activity_fn, arg, **opts)
    except ActivityError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == ERROR_ACTIVITY_CANCELLED:
            final = cause.details[0] if cause.details else {}
            _publish_report(final, err.activity_id, err.activity_type)
            raise TemporalCancelledError(cause.message, final) from err
        raise
    if isinstance(result, dict) and isinstance(result.get("report"), dict):
        _publish_report(result, "", getattr(activity_fn, "__name__", ""))
    return result


def _publish_report(final: Any, activity_id: str | None, activity_type: str | None) -> None:
    if not isinstance(final, dict) or not isinstance(final.get("report"), dict):
        return
    workflow.upsert_memo(
        {
            REPORT_MEMO_KEY: {
                **final["report"],
                "resources": final.get("resources") or [],
                "activity_id": activity_id or "",
                "activity_type": activity_type or "",
            }
        }
    )


# ============================================================================ worker side

_worker_throttle_s: float | None = None


def worker_options(cadence_s: float = 1.0) -> dict[str, Any]:
    """``Worker(...)`` keyword arguments so heartbeats reach the server at ``cadence_s``.

    The SDK otherwise flushes at 0.8 x the heartbeat timeout (at most 60 s), which makes the
    server's ``lastHeartbeatTime`` too coarse to tell a slow agent from a dead one, and delays
    pause / cancel (both arrive in a heartbeat response).
    """
    global _worker_throttle_s
    _worker_throttle_s = cadence_s
    return {
        "max_heartbeat_throttle_interval": timedelta(seconds=cadence_s),
        "default_heartbeat_throttle_interval": timedelta(seconds=cadence_s),
    }


def effective_cadence(keepalive_s: float, heartbeat_timeout_s: float | None) -> float:
    """How often the server records a heartbeat of an activity beating every ``keepalive_s``."""
    if heartbeat_timeout_s:
        throttle = min(0.8 * heartbeat_timeout_s, _worker_throttle_s or 60.0)
    else:
        throttle = _worker_throttle_s or 30.0
    return round(max(keepalive_s, throttle), 3)


# ============================================================================ activity side

Policy = Literal["keep", "release"]
Hook = Callable[[], Awaitable[None] | None]

#: resources kept across attempts of one activity in this worker process (kept on pause)
_kept: dict[tuple[str, str], dict[str, HeldResource]] = {}


@dataclass
class HeldResource:
    """A resource an activity holds, with what happens to it on pause and on cancel.

    ``acquire`` / ``release`` are called by :class:`AgentActivity`; a resource kept on pause
    stays with this worker process and is reused (not acquired again) when the activity
    resumes here.
    """

    id: str
    kind: str = "resource"
    on_pause: Literal["keep", "release", "snapshot"] = "keep"  # snapshot: saved, released
    on_cancel: Policy = "release"
    acquire: Hook | None = None
    release: Hook | None = None
    state: Literal["held", "released"] = "released"
    detail: str = ""

    def manifest(self) -> ResourceEntry:
        return resource_entry(self)


async def _call(hook: Hook | None) -> None:
    if hook is None:
        return
    out = hook()
    if inspect.isawaitable(out):
        await out


Interruption = Literal["paused", "cancelled", "reset", "preempted", "failed", "completed"]


def interruption_kind(exc: BaseException | None) -> Interruption:
    """Why the activity stopped: pause and cancel both arrive as a cancellation."""
    if exc is None:
        return "completed"
    if not isinstance(exc, asyncio.CancelledError | TemporalCancelledError):
        return "failed"
    details = activity.cancellation_details()
    if details is None:
        return "cancelled"
    if details.paused:
        return "paused"
    if details.reset:
        return "reset"
    if details.worker_shutdown:
        return "preempted"
    return "cancelled"  # cancel_requested, not_found, timed_out


class AgentActivity:
    """Heartbeats progress + a resource manifest and handles pause vs cancel.

    - every ``cadence_s`` (and on every :meth:`beat`) it heartbeats irq's details
      (``conventions.heartbeat_details``);
    - :attr:`resumed_progress` is the progress recorded by the previous attempt (after a pause,
      a crash or a retry), so the activity continues where it was;
    - on exit it tells pause from cancel with ``activity.cancellation_details()`` and releases
      resources per their ``on_pause`` / ``on_cancel`` policy, then heartbeats a ``report``
      (``event``, ``kept``, ``released``) before the cancellation propagates, so the console
      sees what the agent did.
    """

    def __init__(
        self,
        resources: Iterable[HeldResource] = (),
        *,
        cadence_s: float = 1.0,
        keepalive: bool = True,
        cancel_as_failure: bool = True,
    ) -> None:
        info = activity.info()
        self._key = (info.workflow_id or "", info.activity_id)
        self._resources = {r.id: r for r in resources}
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else None
        self._keepalive_s = cadence_s
        self.cadence_s = effective_cadence(cadence_s, timeout)
        self._keepalive = keepalive
        self._cancel_as_failure = cancel_as_failure
        self._task: asyncio.Task[None] | None = None
        self._seq = 0
        self.progress: dict[str, Any] = {}
        self.report: dict[str, Any] | None = None
        self.previous: dict[str, Any] = {}
        for detail in info.heartbeat_details:
            if isinstance(detail, dict) and HEARTBEAT_MARKER in detail:
                self.previous = detail
        self.resumed_progress: dict[str, Any] = dict(self.previous.get("progress") or {})
        self.outcome: Interruption | None = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> AgentActivity:
        kept = _kept.pop(self._key, {})
        reused: list[str] = []
        acquired: list[str] = []
        for res in self._resources.values():
            if res.id in kept and kept[res.id].state == "held":
                res.state = "held"
                reused.append(res.id)
                continue
            await _call(res.acquire)
            res.state = "held"
            acquired.append(res.id)
        if self.previous:
            self.progress = dict(self.resumed_progress)
            self.report = {
                "event": "resumed",
                "at": _now(),
                "attempt": activity.info().attempt,
                "resumed_from": self.resumed_progress,
                "kept": reused,
                "reacquired": acquired,
            }
        self.beat()
        if self._keepalive:
            self._task = asyncio.create_task(self._keep_beating())
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        kind = interruption_kind(exc)
        self.outcome = kind
        if kind in ("paused", "reset", "preempted"):
            policy_of: Callable[[HeldResource], str] = lambda r: r.on_pause  # noqa: E731
        elif kind in ("cancelled", "failed"):
            policy_of = lambda r: r.on_cancel  # noqa: E731
        else:
            policy_of = lambda r: "release"  # noqa: E731
        kept: list[str] = []
        released: list[str] = []
        for res in self._resources.values():
            if res.state != "held":
                continue
            if policy_of(res) == "keep":
                kept.append(res.id)
                continue
            try:
                await _call(res.release)
                res.state = "released"
                released.append(res.id)
            except Exception as err:  # report, never mask the interruption
                res.detail = f"release failed: {err}"
                kept.append(res.id)
        if kind in ("paused", "reset", "preempted") and kept:
            _kept[self._key] = {rid: self._resources[rid] for rid in kept}
        self.report = {"event": kind, "at": _now(), "kept": kept, "released": released}
        self.beat()
        details = activity.cancellation_details() if kind == "cancelled" else None
        if self._cancel_as_failure and details is not None and details.cancel_requested:
            # The SDK reports a cancelled activity without details: fail it with the report
            # instead (run_activity turns this back into a cancellation of the workflow).
            raise ApplicationError(
                "cancelled on request; released: " + (", ".join(released) or "nothing"),
                self.details(),
                type=ERROR_ACTIVITY_CANCELLED,
                non_retryable=True,
            ) from exc

    async def _keep_beating(self) -> None:
        while True:
            await asyncio.sleep(self._keepalive_s)
            self.beat()

    # ---------------------------------------------------------------- reporting

    def beat(self, **progress: Any) -> None:
        """Record progress (merged into the last one) and heartbeat the details."""
        self.progress.update(progress)
        self._seq += 1
        try:
            activity.heartbeat(self.details())
        except RuntimeError:  # activity already done: nothing to report to
            pass

    def details(self) -> dict[str, Any]:
        return heartbeat_details(
            progress=dict(self.progress),
            resources=[r.manifest() for r in self._resources.values()],
            cadence_s=self.cadence_s,
            seq=self._seq,
            report=self.report,
        )

    def result(self, **extra: Any) -> dict[str, Any]:
        """An activity result carrying the final manifest and report (for the workflow)."""
        return {
            "progress": dict(self.progress),
            "report": self.report,
            "resources": [r.manifest() for r in self._resources.values()],
            **extra,
        }


def _now() -> str:
    return datetime.now(UTC).isoformat()
