"""Pure mapping from Temporal's HTTP answers to irq's domain model (no I/O, no clock).

Native state -> unified state (``README.md`` has the table):

- workflow closed: COMPLETED / CONTINUED_AS_NEW -> completed, FAILED / TIMED_OUT -> failed,
  CANCELED -> cancelled, TERMINATED -> terminated;
- workflow running, judged from its pending activities (the worst one wins):
  CANCEL_REQUESTED (or a workflow cancel request) -> cancelling, paused by a workflow rule
  (``pauseInfo.ruleId``: the engine stopped it, ``run_failures.py``) -> given_up, PAUSED -> paused,
  PAUSE_REQUESTED -> pausing, SCHEDULED after a server-recorded heartbeat timeout -> lost,
  SCHEDULED after any other failure -> backing_off, STARTED with a heartbeat older than the
  cadence plus a margin (at the time it was observed) -> late, else running;
- no pending activity: a pending irq interrupt -> waiting; the last activity timed out on its
  heartbeat with no retry left (from history) -> lost; else running.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backend_adapters.interrupt_deadline import deadline_at_of
from backend_adapters.temporal.conventions import (
    DECISION_KINDS,
    HEARTBEAT_MARKER,
    progress_fraction,
)
from backend_adapters.temporal.payloads import (
    decode_payloads,
    parse_duration,
    parse_time,
)
from backend_adapters.temporal.run_failures import (
    ClosedFacts,
    given_up_error,
    paused_by_rule,
    step_retry,
)
from console.model import (
    Action,
    DecisionKind,
    Interrupt,
    InterruptPolicy,
    Resource,
    Run,
    RunState,
)
from console.semantics import classify_liveness

BACKEND = "temporal"

WORKFLOW_STATUS: dict[str, RunState] = {
    "WORKFLOW_EXECUTION_STATUS_RUNNING": RunState.RUNNING,
    "WORKFLOW_EXECUTION_STATUS_COMPLETED": RunState.COMPLETED,
    "WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW": RunState.COMPLETED,
    "WORKFLOW_EXECUTION_STATUS_FAILED": RunState.FAILED,
    "WORKFLOW_EXECUTION_STATUS_TIMED_OUT": RunState.FAILED,
    "WORKFLOW_EXECUTION_STATUS_CANCELED": RunState.CANCELLED,
    "WORKFLOW_EXECUTION_STATUS_TERMINATED": RunState.TERMINATED,
    "WORKFLOW_EXECUTION_STATUS_PAUSED": RunState.PAUSED,  # workflow pause (disabled by default)
}

#: the worse state wins when several activities are pending
_SEVERITY = [
    RunState.CANCELLING,
    RunState.GIVEN_UP,
    RunState.PAUSED,
    RunState.PAUSING,
    RunState.LOST,
    RunState.BACKING_OFF,
    RunState.LATE,
    RunState.WAITING,
    RunState.RUNNING,
]

#: a workflow task waiting longer than this for a worker gets a warning
STUCK_WORKFLOW_TASK_S = 10.0

#: the Python SDK flushes heartbeats every 0.8 x heartbeat timeout, at most every 60 s
SDK_DEFAULT_MAX_THROTTLE_S = 60.0


def short_enum(value: Any, prefix: str) -> str:
    text = str(value or "")
    return text[len(prefix) :].lower() if text.startswith(prefix) else text.lower()


# ============================================================================ activities


@dataclass
class ActivityView:
    """One pending activity from describe, decoded."""

    activity_id: str
    activity_type: str
    state: str  # scheduled | started | cancel_requested | pause_requested | paused
    attempt: int = 1
    maximum_attempts: int = 0  # 0 = unlimited
    heartbeat_at: datetime | None = None
    heartbeat_timeout_s: float | None = None
    start_to_close_s: float | None = None
    details: Any = None  # the last heartbeat details (first payload)
    last_failure: dict[str, Any] | None = None
    next_attempt_at: datetime | None = None
    scheduled_at: datetime | None = None  # waiting for a retry: when the next attempt is due
    last_started_at: datetime | None = None
    last_worker: str = ""
    paused: bool = False
    pause_info: dict[str, Any] | None = None

    @property
    def irq_details(self) -> dict[str, Any] | None:
        d = self.details
        return d if isinstance(d, dict) and HEARTBEAT_MARKER in d else None

    @property
    def failure_timeout_type(self) -> str:
        info = (self.last_failure or {}).get("timeoutFailureInfo") or {}
        return short_enum(info.get("timeoutType"), "TIMEOUT_TYPE_")

    @property
    def failure_type(self) -> str:
        info = (self.last_failure or {}).get("applicationFailureInfo") or {}
        return str(info.get("type") or "")

    @property
    def lost_on_heartbeat(self) -> bool:
        """The server recorded a heartbeat timeout and no attempt runs now."""
        return self.state == "scheduled" and self.failure_timeout_type == "heartbeat"

    @property
    def cadence_s(self) -> float | None:
        """How often the server should record a heartbeat of this activity."""
        irq = self.irq_details
        if irq is not None:
            reported = irq.get("cadence_s")
            if isinstance(reported, int | float) and reported > 0:
                return float(reported)
        if self.heartbeat_timeout_s:
            return round(min(0.8 * self.heartbeat_timeout_s, SDK_DEFAULT_MAX_THROTTLE_S), 3)
        return None

    def contract(self) -> dict[str, Any]:
        return {
            "activity_id": self.activity_id,
            "activity_type": self.activity_type,
            "state": self.state,
            "attempt": self.attempt,
            "maximum_attempts": self.maximum_attempts,
            "heartbeat_at": self.heartbeat_at.isoformat() if self.heartbeat_at else None,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "cadence_s": self.cadence_s,
            "paused": self.paused,
            "pause_info": self.pause_info,
            "last_failure": _failure_summary(self.last_failure),
            "next_attempt_at": self.next_attempt_at.isoformat() if self.next_attempt_at else None,
            "last_worker": self.last_worker,
        }


def _failure_summary(failure: dict[str, Any] | None) -> dict[str, Any] | None:
    if not failure:
        return None
    out: dict[str, Any] = {"message": failure.get("message", "")}
    app = failure.get("applicationFailureInfo")
    if isinstance(app, dict) and app.get("type"):
        out["type"] = app["type"]
    timeout = failure.get("timeoutFailureInfo")
    if isinstance(timeout, dict):
        out["timeout_type"] = short_enum(timeout.get("timeoutType"), "TIMEOUT_TYPE_")
    return out


def activity_from_json(raw: dict[str, Any]) -> ActivityView:
    options = raw.get("activityOptions") or {}
    retry = options.get("retryPolicy") or {}
    details = decode_payloads(raw.get("heartbeatDetails"))
    timeout = parse_duration(options.get("heartbeatTimeout") or raw.get("heartbeatTimeout"))
    return ActivityView(
        activity_id=str(raw.get("activityId", "")),
        activity_type=str((raw.get("activityType") or {}).get("name", "")),
        state=short_enum(raw.get("state"), "PENDING_ACTIVITY_STATE_") or "scheduled",
        attempt=int(raw.get("attempt") or 1),
        maximum_attempts=int(raw.get("maximumAttempts") or retry.get("maximumAttempts") or 0),
        heartbeat_at=parse_time(raw.get("lastHeartbeatTime")),
        heartbeat_timeout_s=timeout,
        start_to_close_s=parse_duration(options.get("startToCloseTimeout")),
        details=details[0] if details else None,
        last_failure=raw.get("lastFailure") if isinstance(raw.get("lastFailure"), dict) else None,
        next_attempt_at=parse_time(raw.get("nextAttemptScheduleTime")),
        scheduled_at=parse_time(raw.get("scheduledTime")),
        last_started_at=parse_time(raw.get("lastStartedTime")),
        last_worker=str(raw.get("lastWorkerIdentity") or ""),
        paused=bool(raw.get("paused")),
        pause_info=raw.get("pauseInfo") if isinstance(raw.get("pauseInfo"), dict) else None,
    )


def activities_from_describe(describe: dict[str, Any]) -> list[ActivityView]:
    pending = describe.get("pendingActivities")
    if not isinstance(pending, list):
        return []
    return [activity_from_json(a) for a in pending if isinstance(a, dict)]


def activity_state(act: ActivityView, observed_at: datetime) -> RunState:
    """The unified state one pending activity implies, judged at ``observed_at``."""
    if act.state == "cancel_requested":
        return RunState.CANCELLING
    if act.state == "paused":
        return RunState.GIVEN_UP if paused_by_rule(act.pause_info) else RunState.PAUSED
    if act.state == "pause_requested" or act.paused:
        return RunState.PAUSING
    if act.state == "scheduled":
        if act.lost_on_heartbeat:
            return RunState.LOST
        if act.last_failure is not None and act.attempt > 1:
            return RunState.BACKING_OFF
        return RunState.RUNNING  # waiting for a worker to pick the first attempt up
    if act.heartbeat_timeout_s is None:
        return RunState.RUNNING  # nothing to judge liveness by
    liveness = classify_liveness(
        act.heartbeat_at,
        observed_at,
        interval_s=act.cadence_s,
        timeout_s=act.heartbeat_timeout_s,
        started_at=act.last_started_at,
    )
    # "lost" is the server's call (it records the timeout a few ms after it is due): until
    # then a silent activity is late
    return RunState.LATE if liveness in ("late", "lost") else RunState.RUNNING


def primary_activity(acts: list[ActivityView], observed_at: datetime) -> ActivityView | None:
    """The activity whose state the run shows: the worst; among equals, irq-reporting first."""
    if not acts:
        return None
    return min(
        acts,
        key=lambda a: (
            _SEVERITY.index(activity_state(a, observed_at)),
            a.irq_details is None,
            -(a.heartbeat_at.timestamp() if a.heartbeat_at else 0.0),
        ),
    )


# ============================================================================ resources


def resources_from_details(details: Any) -> list[Resource]:
    if not isinstance(details, dict):
        return []
    raw = details.get("resources")
    if not isinstance(raw, list):
        return []
    out: list[Resource] = []
    for item in raw:
        if isinstance(item, str):
            out.append(Resource(id=item))
        elif isinstance(item, dict) and item.get("id"):
            try:
                out.append(Resource.model_validate(item))
            except ValueError:
                out.append(Resource(id=str(item["id"]), detail="unparsed manifest entry"))
    return out


def resources_after_report(resources: list[Resource], report: dict[str, Any]) -> list[Resource]:
    """Apply an agent report (``kept`` / ``released`` ids) to a manifest."""
    released = set(report.get("released") or ())  # the HTTP API turns [] into null
    kept = set(report.get("kept") or ())
    out: list[Resource] = []
    for res in resources:
        if res.id in released:
            out.append(res.model_copy(update={"state": "released"}))
        elif res.id in kept:
            out.append(res.model_copy(update={"state": "held"}))
        else:
            out.append(res)
    return out


def resources_unreported(resources: list[Resource], why: str) -> list[Resource]:
    """Resources still held when a run ended without the agent reporting a release."""
    return [
        r.model_copy(update={"state": "suspected_leak", "detail": why}) if r.state == "held" else r
        for r in resources
    ]


# ============================================================================ interrupts


def interrupts_from_shape(
    run_id: str, items: Any, *, fallback_created_at: datetime
) -> list[Interrupt]:
    """Pending interrupts in the common shape (memo or query result) -> Interrupt models."""
    if not isinstance(items, list):
        return []
    out: list[Interrupt] = []
    for item in items:
        if not isinstance(item, dict) or not item.get("interrupt_id"):
            continue
        native = str(item["interrupt_id"])
        allowed = [
            DecisionKind(d)
            for d in (item.get("allowed_decisions") or ["approve", "reject"])
            if d in DECISION_KINDS
        ]
        schema = item.get("args_schema")
        args = item.get("args")
        out.append(
            Interrupt(
                id=Interrupt.make_id(run_id, native),
                run_id=run_id,
                native_id=native,
                title=str(item.get("title") or native),
                description=str(item.get("description") or ""),
                action=str(item.get("action") or ""),
                args=args if isinstance(args, dict) else {},
                args_schema=schema if isinstance(schema, dict) else None,
                allowed_decisions=allowed or [DecisionKind.APPROVE, DecisionKind.REJECT],
                created_at=parse_time(item.get("created_at")) or fallback_created_at,
                policy=InterruptPolicy.from_payload(item.get("policy")),
                deadline_at=deadline_at_of(item.get("deadline_at")),  # with a rule's: earliest
            )
        )
    return out


# ============================================================================ runs


@dataclass
class RunEvidence:
    """What the adapter knows about one workflow when it builds the Run."""

    workflow_id: str
    info: dict[str, Any]  # a list entry or describe's workflowExecutionInfo
    activities: list[ActivityView] | None = None  # None: not described yet
    observed_at: datetime | None = None  # when ``activities`` was described
    interrupt_ids: list[str] = field(default_factory=list)
    cancel_requested: bool = False
    heartbeat_lost: dict[str, Any] | None = None  # from history: ACTIVITY_TASK_TIMED_OUT
    report: dict[str, Any] | None = None  # memo irq_report (activity outcome)
    last_manifest: list[Resource] = field(default_factory=list)
    stale_workers: dict[str, float] = field(default_factory=dict)  # identity -> seconds
    workflow_task_waiting_s: float | None = None  # pending workflow task, waiting that long
    closed: ClosedFacts | None = None  # a failed run's close event (``run_failures.py``)


def run_from_evidence(ev: RunEvidence, *, context: str, now: datetime) -> Run:
    info = ev.info
    run_id = Run.make_id(BACKEND, context, ev.workflow_id)
    status = str(info.get("status") or "")
    base = WORKFLOW_STATUS.get(status, RunState.RUNNING)
    observed = ev.observed_at or now
    acts = ev.activities or []
    primary = primary_activity(acts, observed)
    warnings: list[str] = []
    details: dict[str, Any] = {
        "run_id": (info.get("execution") or {}).get("runId", ""),
        "workflow_type": (info.get("type") or {}).get("name", ""),
        "task_queue": info.get("taskQueue", ""),
        "history_length": int(info.get("historyLength") or 0),
        "observed_at": ev.observed_at.isoformat() if ev.observed_at else None,
        "activities": [a.contract() for a in acts],
    }
    run = Run(
        id=run_id,
        backend=BACKEND,
        context=context,
        native_id=ev.workflow_id,
        name=details["workflow_type"],
        native_state=short_enum(status, "WORKFLOW_EXECUTION_STATUS_"),
        started_at=parse_time(info.get("startTime")),
        updated_at=now,
        interrupts=[Interrupt.make_id(run_id, i) for i in ev.interrupt_ids],
        details=details,
    )
    details = run.details  # pydantic copied the dict: keep writing to the model's own

    run.app_version, run.version_pinned = worker_version(info)
    run.heartbeat_expected = primary is not None  # a workflow with no activity has no beat
    if primary is not None:
        irq = primary.irq_details
        run.heartbeat_at = primary.heartbeat_at
        run.observed_at = ev.observed_at
        run.heartbeat_timeout_s = primary.heartbeat_timeout_s
        run.step_timeout_s = primary.start_to_close_s
        run.heartbeat_interval_s = primary.cadence_s
        run.attempt = primary.attempt
        run.in_flight_step = f"{primary.activity_type} (activity {primary.activity_id})"
        run.native_state += f"/{primary.state}"
        run.resources = resources_from_details(primary.details)
        if irq is not None:
            run.progress = progress_fraction(irq.get("progress"))
            details["progress"] = irq.get("progress")
            if isinstance(irq.get("report"), dict):
                details["report"] = irq["report"]
        elif isinstance(primary.details, dict):
            run.progress = progress_fraction(primary.details.get("progress"))
        if primary.next_attempt_at:
            details["next_attempt_at"] = primary.next_attempt_at.isoformat()
        if primary.pause_info:
            details["pause"] = primary.pause_info
    elif ev.last_manifest:
        run.resources = list(ev.last_manifest)

    # ----------------------------------------------------------------- state
    if base is not RunState.RUNNING:
        run.state = base
        _closed_resources(run, ev)
        _closed_facts(run, ev, details["run_id"])
    else:
        candidates = [activity_state(a, observed) for a in acts]
        if ev.cancel_requested:
            candidates.append(RunState.CANCELLING)
        if not acts and ev.heartbeat_lost is not None:
            candidates.append(RunState.LOST)
            lost = ev.heartbeat_lost
            details["lost"] = lost
            lost_resources = resources_from_details(lost.get("details"))
            if lost_resources:
                run.resources = lost_resources
            run.heartbeat_at = run.heartbeat_at or parse_time(lost.get("last_heartbeat_at"))
        if ev.interrupt_ids:
            candidates.append(RunState.WAITING)
        candidates.append(RunState.RUNNING)
        run.state = min(candidates, key=_SEVERITY.index)
        _retry_facts(run, acts, primary)
        if run.state is RunState.LOST:
            run.preempted = True
            details.setdefault("lost", {"by": "server", "reason": "heartbeat timeout"})
        if run.state in (RunState.PAUSED, RunState.PAUSING):
            run.preempted = True
        # the primary activity's facts are the run's (semantics words them); the others
        # are named here
        warnings.extend(activity_warnings([a for a in acts if a is not primary]))
        warnings.extend(heartbeat_detail_warnings(acts))
        run.action_notes = action_notes(acts)
        warnings.extend(_worker_warnings(acts, ev.stale_workers))
        waited = ev.workflow_task_waiting_s
        if waited is not None and waited > STUCK_WORKFLOW_TASK_S:
            warnings.append(
                f"workflow task waiting {waited:.0f}s for a worker: is any worker polling "
                f"task queue '{details['task_queue']}'?"
            )
    run.warnings = warnings
    return run


def _closed_facts(run: Run, ev: RunEvidence, run_id: str) -> None:
    """A closed run's error (failed runs) and last completed activity, from its history."""
    if ev.closed is not None and ev.closed.run_id == run_id:
        run.error = ev.closed.error if run.state is RunState.FAILED else None
        run.last_step_at = ev.closed.last_step_at


def _retry_facts(run: Run, acts: list[ActivityView], primary: ActivityView | None) -> None:
    """A running run's retrying activity, and the error of one a workflow rule gave up."""
    run.retrying = step_retry(acts)
    if run.state is RunState.GIVEN_UP and primary is not None:
        run.error = given_up_error(
            f"{primary.activity_type} (activity {primary.activity_id})",
            paused_by_rule(primary.pause_info) or "?",
            primary.last_failure,
            parse_time((primary.pause_info or {}).get("pauseTime")),
        )


def _closed_resources(run: Run, ev: RunEvidence) -> None:
    manifest = run.resources or list(ev.last_manifest)
    if ev.report is not None:
        resources = ev.report.get("resources")
        base = resources_from_details({"resources": resources}) if resources else manifest
        run.resources = resources_after_report(base, ev.report)
        run.details["report"] = ev.report
    elif run.state is RunState.TERMINATED:
        run.resources = resources_unreported(manifest, "terminated: the agent got no cleanup")
    elif run.state is not RunState.COMPLETED:
        run.resources = resources_unreported(
            manifest, f"{run.state.value} without a release report from the agent"
        )
    else:
        run.resources = manifest


def activity_warnings(acts: list[ActivityView]) -> list[str]:
    """Recoverability warnings about activities other than the run's primary one (the
    primary's facts are in the Run's typed fields, and ``console.semantics`` words them)."""
    out: list[str] = []
    for act in acts:
        name = f"activity '{act.activity_type}' ({act.activity_id})"
        if act.heartbeat_timeout_s is None:
            guard = f" ({act.start_to_close_s:g}s)" if act.start_to_close_s else ""
            out.append(
                f"{name} has no heartbeat timeout: a dead worker is noticed only at its "
                f"start-to-close timeout{guard}"
            )
        if act.attempt >= 2:
            out.append(f"{name} is on attempt {act.attempt}")
    return out


def heartbeat_detail_warnings(acts: list[ActivityView]) -> list[str]:
    """What a started activity's heartbeats leave out, said as what is missing."""
    out: list[str] = []
    for act in acts:
        if act.state != "started" or act.heartbeat_timeout_s is None:
            continue
        name = f"activity '{act.activity_type}' ({act.activity_id})"
        if act.heartbeat_at is None:
            out.append(f"{name} has not heartbeated yet: no resources or progress reported")
        elif act.irq_details is None:
            out.append(
                f"{name} heartbeats without irq details: it reports no resources, so a plan "
                "cannot say what pause or cancel keeps or releases"
            )
    return out


def worker_version(info: dict[str, Any]) -> tuple[str | None, bool | None]:
    """(version, pinned) of a workflow: Worker Versioning's behaviour and deployment version
    when the workflow has them (pinned = ``VERSIONING_BEHAVIOR_PINNED``); else the build id
    the SDK derived from the worker's code, not pinned. Without either: unknown."""
    versioning = info.get("versioningInfo")
    if isinstance(versioning, dict) and versioning:
        behavior = short_enum(versioning.get("behavior"), "VERSIONING_BEHAVIOR_")
        version = versioning.get("deploymentVersion") or {}
        build = version.get("buildId") if isinstance(version, dict) else None
        name = version.get("deploymentName") if isinstance(version, dict) else None
        label = f"{name}:{build}" if name and build else (build or versioning.get("version"))
        return (str(label) if label else None), behavior == "pinned"
    stamp = info.get("mostRecentWorkerVersionStamp")
    if isinstance(stamp, dict) and stamp.get("buildId"):
        # an SDK-derived build id; ``useVersioning`` marks the older build-id versioning
        return str(stamp["buildId"]), bool(stamp.get("useVersioning"))
    if info.get("assignedBuildId"):
        return str(info["assignedBuildId"]), None
    if "mostRecentWorkerVersionStamp" in info or "autoResetPoints" in info:
        return None, False  # described, and no versioning at all
    return None, None


def action_notes(acts: list[ActivityView]) -> dict[Action, list[str]]:
    """What each action does to these activities, in operator words (for plans)."""
    pause: list[str] = []
    cancel: list[str] = []
    for act in acts:
        name = f"activity '{act.activity_type}' ({act.activity_id})"
        if act.heartbeat_timeout_s is None and act.state == "started":
            unreachable = (
                f"{name} has no heartbeat timeout: the server cannot reach it, so it sees "
                "the request only when it completes"
            )
            pause.append(unreachable)
            cancel.append(unreachable)
        if act.attempt >= 2:
            cancel.append(
                f"{name} is on attempt {act.attempt}: a reset of a running attempt >= 2 is "
                "ignored until the heartbeat timeout, and a cancel landing then can end the "
                "workflow FAILED; prefer pause, reset (keep paused), resume"
            )
        if act.state in ("started", "scheduled"):
            pause.append(
                f"{name}: pause ends the running attempt {act.attempt} (it fails with "
                "ActivityPause and the attempt counter moves on; retries are not exhausted); "
                "resume starts the next attempt from the last heartbeat details"
            )
        if act.heartbeat_timeout_s is not None:
            cancel.append(
                f"{name}: the agent sees the cancel on its next heartbeat "
                f"(within {act.cadence_s or act.heartbeat_timeout_s:g}s) and releases "
                "resources marked on_cancel=release"
            )
    return {
        Action.PAUSE: pause,
        Action.CANCEL: cancel,
        Action.TERMINATE: ["terminate closes the workflow at once: no activity gets to clean up"],
    }


def _worker_warnings(acts: list[ActivityView], stale: dict[str, float]) -> list[str]:
    out: list[str] = []
    for act in acts:
        if act.state == "started" and act.last_worker in stale:
            out.append(
                f"worker {act.last_worker} running activity {act.activity_id} last reported "
                f"{stale[act.last_worker]:.0f}s ago"
            )
    return out


# ============================================================================ history


def heartbeat_loss_from_history(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest activity event, if it is a heartbeat timeout (newest-first ``events``).

    Returns ``{"by", "reason", "at", "retry_state", "details"}`` (details = the last heartbeat
    details the server kept) or None.
    """
    for event in events:
        etype = str(event.get("eventType", ""))
        if not etype.startswith("EVENT_TYPE_ACTIVITY_TASK_"):
            continue
        if etype != "EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT":
            return None
        attrs = event.get("activityTaskTimedOutEventAttributes") or {}
        failure = attrs.get("failure") or {}
        timeout = failure.get("timeoutFailureInfo") or {}
        if short_enum(timeout.get("timeoutType"), "TIMEOUT_TYPE_") != "heartbeat":
            return None
        last = decode_payloads(timeout.get("lastHeartbeatDetails"))
        detail = last[0] if last else None
        return {
            "by": "server",
            "reason": "heartbeat timeout (no retry left)",
            "at": event.get("eventTime"),
            "retry_state": short_enum(attrs.get("retryState"), "RETRY_STATE_"),
            "details": detail,
        }
    return None
