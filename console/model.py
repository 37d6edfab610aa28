"""Domain types shared by adapters, gateway, CLI and TUI (JSON contract: docs/json-contract.md).

Nothing here imports Textual, typer or websockets. The JSON field names produced by the
``contract()`` methods are the scripting contract: add fields, never rename them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from console.liveness import classify_liveness
from console.release_outcome import ReleaseOutcome
from console.run_facts import RunError, StepRetry, WorkAtRisk

if TYPE_CHECKING:
    from console.run_record import RunRecord


def utcnow() -> datetime:
    return datetime.now(UTC)


def age_seconds(at: datetime | None, now: datetime | None = None) -> float | None:
    """Seconds elapsed since ``at`` (never negative); None when ``at`` is None."""
    if at is None:
        return None
    now = now or utcnow()
    return max(0.0, round((now - at).total_seconds(), 3))


class RunState(StrEnum):
    RUNNING = "running"
    LATE = "late"
    LOST = "lost"
    WAITING = "waiting"
    PAUSING = "pausing"
    PAUSED = "paused"
    BACKING_OFF = "backing_off"
    CANCELLING = "cancelling"
    #: the engine stopped retrying (DBOS past its recovery limit, Restate paused the
    #: invocation after its retries, Temporal paused the activity); ``retry`` brings it back
    GIVEN_UP = "given_up"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED, RunState.TERMINATED}
)


class Action(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    TERMINATE = "terminate"
    DECIDE = "decide"
    RETRY = "retry"  # re-run a failed / given-up / cancelled run from a journaled step
    RELEASE = "release"  # free one resource of a run (irq release --force)


class DecisionKind(StrEnum):
    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    RESPOND = "respond"


class Role(StrEnum):
    """Ordered roles; ``agent`` may only push heartbeats on the agent channel."""

    AGENT = "agent"
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _ROLE_RANK[self]

    def at_least(self, other: Role) -> bool:
        return self.rank >= other.rank


_ROLE_RANK = {Role.AGENT: 0, Role.VIEWER: 1, Role.OPERATOR: 2, Role.ADMIN: 3}


class Resource(BaseModel):
    """Something a run holds, with what must happen to it on pause and on cancel."""

    model_config = ConfigDict(extra="ignore")

    id: str
    kind: str = "resource"
    #: "snapshot": the agent saves its state on pause and restores it on resume (a sandbox,
    #: a KV cache); a pause keeps it (console/work_at_risk.py)
    on_pause: Literal["keep", "release", "snapshot"] = "keep"
    on_cancel: Literal["release", "keep"] = "release"
    state: Literal["held", "released", "suspected_leak"] = "held"
    detail: str = ""

    def contract(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "on_pause": self.on_pause,
            "on_cancel": self.on_cancel,
            "state": self.state,
            "detail": self.detail,
        }


class Heartbeat(BaseModel):
    """One liveness sample of a run."""

    model_config = ConfigDict(extra="ignore")

    at: datetime
    seq: int = 0
    progress: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    resources: list[Resource] | None = None

    def contract(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "seq": self.seq,
            "progress": self.progress,
            "details": self.details,
        }


class JournalStep(BaseModel):
    index: int
    name: str
    status: Literal["completed", "in_flight", "failed"]
    started_at: datetime | None = None
    completed_at: datetime | None = None
    detail: str = ""

    def contract(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "status": self.status,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "completed_at": self.completed_at.isoformat() if self.completed_at else None,
            "detail": self.detail,
        }


class InterruptKind(StrEnum):
    """How a run waits for a person (DESIGN.md §1, "Native waits are interrupts too").

    ``helper``: raised through irq's agent-side helpers; the others are each backend's own
    idiom, discovered from the backend with no irq code in the agent."""

    HELPER = "helper"
    SIGNAL = "signal"  # Temporal: wait_condition until a signal arrives
    UPDATE = "update"  # Temporal: wait_condition until an update is accepted
    AWAKEABLE = "awakeable"  # Restate: an awakeable handed out and awaited
    PROMISE = "promise"  # Restate workflow: a durable promise resolved by a shared handler
    MESSAGE = "message"  # DBOS: recv(topic) waiting for send
    BREAKPOINT = "breakpoint"  # LangGraph: static interrupt_before / interrupt_after
    MIDDLEWARE = "middleware"  # LangGraph: HumanInTheLoopMiddleware's batched action requests


class InterruptHandler(BaseModel):
    """One native way to answer an interrupt: a Temporal signal or update definition, a
    Restate workflow's shared handler, a DBOS topic."""

    model_config = ConfigDict(extra="ignore")

    name: str
    kind: Literal["signal", "update", "shared", "topic"]
    description: str = ""
    args_schema: dict[str, Any] | None = None  # JSON Schema the workflow publishes, if any

    def contract(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "args_schema": self.args_schema,
        }


class ActionRequest(BaseModel):
    """One call of a batched interrupt (LangGraph HumanInTheLoopMiddleware): each is decided
    on its own, and the run resumes once with the decisions in order."""

    model_config = ConfigDict(extra="ignore")

    action: str
    args: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    allowed_decisions: list[DecisionKind] = Field(
        default_factory=lambda: [DecisionKind.APPROVE, DecisionKind.REJECT]
    )

    def contract(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "args": self.args,
            "description": self.description,
            "allowed_decisions": [d.value for d in self.allowed_decisions],
        }


class Decision(BaseModel):
    """What an operator decided about an interrupt."""

    kind: DecisionKind
    args: dict[str, Any] | None = None  # edit: the edited arguments
    feedback: str | None = None  # reject: text that goes back to the agent
    response: Any = None  # respond: the human's answer (text or JSON)
    # native waits: which handler answers (a Temporal signal/update, a Restate shared
    # handler); None picks the only one, and several without a choice is refused
    handler: str | None = None
    topic: str | None = None  # DBOS recv(topic): the topic to send on (None: DBOS's default)
    # a batched interrupt (kind middleware): one decision per action request, in order
    decisions: list[Decision] | None = None

    @classmethod
    def batched(cls, calls: list[Decision]) -> Decision:
        """Per-call decisions as one command. Its kind is the strongest of the calls' (an
        edit if any call is edited, else approve if any call goes ahead, else reject): what
        command rules and four eyes judge; each call is checked on its own."""
        kinds = {c.kind for c in calls}
        if DecisionKind.EDIT in kinds:
            kind = DecisionKind.EDIT
        elif kinds & {DecisionKind.APPROVE, DecisionKind.RESPOND}:
            kind = DecisionKind.APPROVE
        else:
            kind = DecisionKind.REJECT
        feedback = "; ".join(c.feedback or "" for c in calls if c.feedback) or None
        args = next((c.args for c in calls if c.args is not None), None)
        return cls(kind=kind, decisions=calls, feedback=feedback, args=args)

    def payload(self) -> dict[str, Any]:
        """The value delivered to the agent (common shape across backends)."""
        out: dict[str, Any] = {"type": self.kind.value}
        if self.kind is DecisionKind.EDIT:
            out["args"] = self.args or {}
        elif self.kind is DecisionKind.REJECT:
            out["feedback"] = self.feedback or ""
        elif self.kind is DecisionKind.RESPOND:
            out["response"] = self.response
        return out


def decision_text(decision: Decision) -> str:
    """``approve``, or for per-call decisions ``approve, reject`` (one per call, in order)."""
    if decision.decisions:
        return ", ".join(d.kind.value for d in decision.decisions)
    return decision.kind.value


class DecisionRecord(BaseModel):
    kind: DecisionKind
    by: str
    at: datetime
    command_id: str = ""

    def contract(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "by": self.by, "at": self.at.isoformat()}


class InterruptPolicy(BaseModel):
    """The policy rule an interrupt was raised under (a ``require_approval`` tool call)."""

    model_config = ConfigDict(extra="ignore")

    rule: str
    why: str = ""
    decide_role: str = "operator"
    approvers: int = 1
    policy_version: str | None = None
    approvals: list[dict[str, Any]] = Field(default_factory=list)
    deadline_s: float | None = Field(default=None, ge=0)  # the rule's deadline
    default_decision: str | None = None  # applied past it (by the gateway's copy of the rule)

    @classmethod
    def from_payload(cls, value: Any) -> InterruptPolicy | None:
        """The ``policy`` of an agent's interrupt payload, validated; None when absent or bad
        (an agent's payload is untrusted: a malformed policy never hides the interrupt)."""
        if not isinstance(value, dict) or not value.get("rule"):
            return None
        try:
            return cls.model_validate(value)
        except ValueError:
            return None

    def contract(self) -> dict[str, Any]:
        deadline = {"deadline_s": self.deadline_s, "default_decision": self.default_decision}
        return {
            "rule": self.rule,
            "why": self.why,
            "decide_role": self.decide_role,
            "approvers": self.approvers,
            "policy_version": self.policy_version,
            "approvals": list(self.approvals),
            **{k: v for k, v in deadline.items() if v is not None},  # only a rule's deadline
        }


class Interrupt(BaseModel):
    """A structured request for a human decision raised by a run."""

    model_config = ConfigDict(extra="ignore")

    id: str  # RUN_ID#INTERRUPT_ID
    run_id: str
    native_id: str  # the backend's own interrupt id
    title: str
    description: str = ""
    action: str = ""
    args: dict[str, Any] = Field(default_factory=dict)
    args_schema: dict[str, Any] | None = None
    allowed_decisions: list[DecisionKind] = Field(
        default_factory=lambda: [DecisionKind.APPROVE, DecisionKind.REJECT]
    )
    created_at: datetime = Field(default_factory=utcnow)
    status: Literal["pending", "decided", "withdrawn"] = "pending"
    decision: DecisionRecord | None = None
    policy: InterruptPolicy | None = None  # the rule that requires this approval
    kind: InterruptKind = InterruptKind.HELPER
    handlers: list[InterruptHandler] = Field(default_factory=list)  # native kinds: who answers
    deadline_at: datetime | None = None  # a timer on the wait, a policy or config deadline
    # where the run waits, in the backend's terms: a stack line, a journal entry, a topic, a node
    wait_site: str = ""
    actions: list[ActionRequest] = Field(default_factory=list)  # middleware: decided one by one

    @model_validator(mode="after")
    def _policy_deadline(self) -> Interrupt:
        """A rule's deadline counts from the interrupt's creation; beside another one (a timer
        on the wait, the agent's ``deadline=``) the earliest wins."""
        if self.policy is not None and self.policy.deadline_s:
            rule_at = self.created_at + timedelta(seconds=self.policy.deadline_s)
            self.deadline_at = min(self.deadline_at or rule_at, rule_at)
        return self

    @staticmethod
    def make_id(run_id: str, native_id: str) -> str:
        return f"{run_id}#{native_id}"

    def contract(self, now: datetime | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "title": self.title,
            "description": self.description,
            "action": self.action,
            "args": self.args,
            "args_schema": self.args_schema,
            "allowed_decisions": [d.value for d in self.allowed_decisions],
            "created_at": self.created_at.isoformat(),
            "age_s": age_seconds(self.created_at, now),
            "status": self.status,
            "decision": self.decision.contract() if self.decision else None,
            "native_id": self.native_id,
            "policy": self.policy.contract() if self.policy else None,
            "kind": self.kind.value,
            "handlers": [h.contract() for h in self.handlers],
            "deadline_at": self.deadline_at.isoformat() if self.deadline_at else None,
            "wait_site": self.wait_site,
            "actions": [a.contract() for a in self.actions],
        }


class Run(BaseModel):
    """One durable unit of agent work on one backend."""

    model_config = ConfigDict(extra="ignore")

    id: str  # BACKEND:CONTEXT/NATIVE_ID
    backend: str
    context: str
    native_id: str
    name: str = ""
    state: RunState = RunState.RUNNING
    native_state: str = ""
    heartbeat_at: datetime | None = None
    # when the heartbeat fields were read from the backend; liveness is judged at this time
    # (a budgeted poller's data is old, and old data must not make a beating run look late)
    observed_at: datetime | None = None
    heartbeat_interval_s: float | None = None  # expected cadence
    heartbeat_timeout_s: float | None = None
    progress: float | None = None
    resources: list[Resource] = Field(default_factory=list)
    interrupts: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    started_at: datetime | None = None
    updated_at: datetime = Field(default_factory=utcnow)
    preempted: bool = False  # externally suspended (crash, eviction), not a failure
    attempt: int | None = None
    in_flight_step: str | None = None
    # ---- recoverability facts: adapters fill what their backend knows (None = unknown);
    # console.semantics.recoverability_warnings turns them into the ``warnings`` above
    #: False when nothing runs that could heartbeat (a workflow parked with no step pending)
    heartbeat_expected: bool = True
    #: how long one attempt of the in-flight step may run (Temporal: start-to-close timeout;
    #: else what the agent declares)
    step_timeout_s: float | None = None
    #: the backend aborts a step attempt that runs longer than this (Restate: inactivity +
    #: abort timeout)
    abort_timeout_s: float | None = None
    #: where the run's state is kept between steps: "memory" is lost with the worker
    checkpointer: str | None = None
    #: the code version the run is bound to, and whether that binding is pinned (a version
    #: the operator chose) rather than derived from the code (which changes on every edit)
    app_version: str | None = None
    version_pinned: bool | None = None
    #: what each action does to this run on its backend, in operator words (plans show them)
    action_notes: dict[Action, list[str]] = Field(default_factory=dict)
    #: failed / given_up runs: the engine's error and the step it failed in
    error: RunError | None = None
    #: a step the engine is retrying after failures (attempt, last error, next attempt)
    retrying: StepRetry | None = None
    #: when the last journaled step completed (work at risk counts from here)
    last_step_at: datetime | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @staticmethod
    def make_id(backend: str, context: str, native_id: str) -> str:
        return f"{backend}:{context}/{native_id}"

    def heartbeat_age_s(self, now: datetime | None = None) -> float | None:
        return age_seconds(self.heartbeat_at, now)

    def observed_age_s(self, now: datetime | None = None) -> float | None:
        """How old the backend reading behind ``state`` is (None: judged continuously)."""
        return age_seconds(self.observed_at, now)

    def suspected_state(
        self, now: datetime | None = None, state: RunState | None = None
    ) -> RunState | None:
        return suspected_state(self, now, state)

    def contract(self, now: datetime | None = None) -> dict[str, Any]:
        return run_contract(self, now)


# a run's contract and liveness, for a Run and for the gateway's index's records alike


def suspected_state(
    run: Run | RunRecord, now: datetime | None = None, state: RunState | None = None
) -> RunState | None:
    """``late`` or ``lost`` when the heartbeat's age *now* says worse than ``state``.

    ``state`` was judged when the backend was read (``observed_at``); the age keeps growing
    after that. A run shown ``running`` whose last beat is already older than its timeout is
    not known to be running: the console says so instead of ``running``. ``state``: the
    state shown, when a client judged it itself (default the run's).
    """
    state = state or run.state
    if state not in (RunState.RUNNING, RunState.WAITING, RunState.LATE):
        return None
    if run.heartbeat_at is None:
        return None
    now = now or utcnow()
    if run.heartbeat_interval_s:
        liveness = classify_liveness(
            run.heartbeat_at,
            now,
            interval_s=run.heartbeat_interval_s,
            timeout_s=run.heartbeat_timeout_s,
        )
    else:
        age = age_seconds(run.heartbeat_at, now) or 0.0
        timeout = run.heartbeat_timeout_s
        liveness = "lost" if timeout and age > timeout else "unknown"
    if liveness == "lost":
        return RunState.LOST
    if liveness == "late" and state is not RunState.LATE:
        return RunState.LATE
    return None


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def run_contract(run: Run | RunRecord, now: datetime | None = None) -> dict[str, Any]:
    """A run's JSON contract (docs/json-contract.md): add fields, never rename them."""
    suspected = suspected_state(run, now)
    return {
        "id": run.id,
        "backend": run.backend,
        "context": run.context,
        "native_id": run.native_id,
        "name": run.name,
        "state": run.state.value,
        "native_state": run.native_state,
        "heartbeat_age_s": age_seconds(run.heartbeat_at, now),
        "heartbeat_at": _iso(run.heartbeat_at),
        "observed_at": _iso(run.observed_at),
        "heartbeat_timeout_s": run.heartbeat_timeout_s,
        "heartbeat_interval_s": run.heartbeat_interval_s,
        "progress": run.progress,
        "resources": [r.contract() for r in run.resources],
        "interrupts": list(run.interrupts),
        "warnings": list(run.warnings),
        "updated_at": run.updated_at.isoformat(),
        "started_at": _iso(run.started_at),
        "preempted": run.preempted,
        "attempt": run.attempt,
        "in_flight_step": run.in_flight_step,
        # the state is as of ``state_as_of`` (null: judged continuously by the gateway);
        # ``suspected_state``: what the heartbeat age says now when that is worse
        "state_as_of": _iso(run.observed_at),
        "observed_age_s": age_seconds(run.observed_at, now),
        "suspected_state": suspected.value if suspected is not None else None,
        "heartbeat_expected": run.heartbeat_expected,
        "step_timeout_s": run.step_timeout_s,
        "abort_timeout_s": run.abort_timeout_s,
        "checkpointer": run.checkpointer,
        "app_version": run.app_version,
        "version_pinned": run.version_pinned,
        "action_notes": {a.value: list(n) for a, n in run.action_notes.items()},
        "error": run.error.contract() if run.error else None,
        "retrying": run.retrying.contract() if run.retrying else None,
        "last_step_at": _iso(run.last_step_at),
    }


def split_run_id(run_id: str) -> tuple[str, str, str]:
    """``BACKEND:CONTEXT/NATIVE_ID`` -> (backend, context, native_id); ValueError if malformed."""
    head, sep, native = run_id.partition("/")
    backend, colon, context = head.partition(":")
    if not sep or not colon or not backend or not context or not native:
        raise ValueError(f"not a run id (BACKEND:CONTEXT/NATIVE_ID): {run_id!r}")
    return backend, context, native


class PlannedResource(BaseModel):
    run_id: str
    id: str
    kind: str

    def contract(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "id": self.id, "kind": self.kind}


class ActionPlan(BaseModel):
    """What an action will do, computed before it is taken."""

    action: Action
    targets: list[str]
    operations: list[str] = Field(default_factory=list)
    resources_kept: list[PlannedResource] = Field(default_factory=list)
    resources_released: list[PlannedResource] = Field(default_factory=list)
    resources_at_risk: list[PlannedResource] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    will_rerun: list[str] = Field(default_factory=list)  # steps that run again on resume
    steps_kept: list[str] = Field(default_factory=list)  # retry: journaled results kept
    #: retry: steps that run again whose side effects are outside the journal (happen twice)
    unjournaled_effects: list[str] = Field(default_factory=list)
    work_at_risk: list[WorkAtRisk] = Field(default_factory=list)
    from_step: str | None = None  # retry: the first step that runs again (None: the start)
    new_run: bool | None = None  # retry: True when it runs as a new run (a new id)

    def contract(self) -> dict[str, Any]:
        return {
            "action": self.action.value,
            "targets": list(self.targets),
            "operations": list(self.operations),
            "resources_kept": [r.contract() for r in self.resources_kept],
            "resources_released": [r.contract() for r in self.resources_released],
            "resources_at_risk": [r.contract() for r in self.resources_at_risk],
            "warnings": list(self.warnings),
            "will_rerun": list(self.will_rerun),
            "steps_kept": list(self.steps_kept),
            "unjournaled_effects": list(self.unjournaled_effects),
            "work_at_risk": [w.contract() for w in self.work_at_risk],
            "from_step": self.from_step,
            "new_run": self.new_run,
        }


#: planned: dry run; recorded: a four-eyes approval was recorded, not yet delivered
Outcome = Literal["applied", "conflict", "failed", "forbidden", "planned", "recorded"]


class CommandResult(BaseModel):
    id: str  # idempotency key
    action: str
    target: str
    outcome: Outcome
    detail: str = ""
    error: str | None = None  # not_found | conflict | unsupported | unreachable | invalid | ...
    plan: ActionPlan | None = None
    replayed: bool = False  # the same idempotency key was seen before; nothing was re-sent
    new_run_id: str | None = None  # retry: the new run that carries the work (a fork)
    release: ReleaseOutcome | None = None  # release: how it was released, and verified or not

    def contract(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "target": self.target,
            "outcome": self.outcome,
            "detail": self.detail,
            "error": self.error,
            "plan": self.plan.contract() if self.plan else None,
            "replayed": self.replayed,
            "new_run_id": self.new_run_id,
            "release": self.release.contract() if self.release else None,
        }


class AuditEntry(BaseModel):
    at: datetime
    identity: str
    role: str
    action: str
    target: str
    reason: str = ""
    outcome: str
    plan: dict[str, Any] | None = None
    command_id: str = ""
    detail: str = ""

    def contract(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "identity": self.identity,
            "role": self.role,
            "action": self.action,
            "target": self.target,
            "reason": self.reason,
            "outcome": self.outcome,
            "plan": self.plan,
            "command_id": self.command_id,
            "detail": self.detail,
        }


class BackendHealth(BaseModel):
    """Reachability of one configured backend, as seen by the gateway."""

    backend: str
    context: str
    url: str = ""
    reachable: bool = True
    last_ok_at: datetime | None = None
    error: str = ""

    @property
    def key(self) -> str:
        return f"{self.backend}:{self.context}"

    def contract(self, now: datetime | None = None) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "context": self.context,
            "url": self.url,
            "reachable": self.reachable,
            "stale_s": None if self.reachable else age_seconds(self.last_ok_at, now),
            "last_ok_at": self.last_ok_at.isoformat() if self.last_ok_at else None,
            "error": self.error,
        }
