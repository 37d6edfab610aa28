"""Agent-side helpers for DBOS workflows that irq observes and controls.

A user's workflow wraps its body in :class:`AgentRun`::

    DBOS(config=agent_config("billing-agent", DB_URL, app_version="billing-7"))
    configure_agent(DB_URL)  # before launch: recovered workflows start inside launch()
    DBOS.launch()

    @DBOS.workflow()
    def billing_agent(task: dict) -> str:
        gpu = AgentResource("gpu-0/slice-2", kind="gpu", on_pause="keep",
                            acquire=reserve_gpu, release=free_gpu)
        with AgentRun(name="billing", resources=[gpu], interval_s=2, timeout_s=10) as run:
            draft = run.step("draft", write_draft, task)          # journaled, marked in flight
            reply = run.interrupt("Send invoice?", action="send_email",
                                  args={"to": [task["email"]], "body": draft},
                                  args_schema=EMAIL_SCHEMA,
                                  allowed=("approve", "edit", "reject"))
            if reply.approved:
                run.step("send", send_email, reply.args)
        return "done"

What it does (README.md has the full conventions):

- **Declares** the run (``irq.run`` attribute: name, heartbeat cadence, resources with their
  ``on_pause``/``on_cancel`` policies) and reports resource states (``irq.report``), written as
  workflow attributes through a ``DBOSClient``, so they add no journal rows.
- **Acquires** resources on every execution (workflow code re-runs on replay; ``acquire`` must
  be idempotent: "ensure held by this run"), so a run resumed after a pause re-takes what it
  released and finds what it kept.
- **Marks the step in flight** (``irq.step``) from inside each step: DBOS lists only completed
  steps, and a ``set_event`` in workflow code would itself be a journaled step.
- **Raises interrupts** per dbos.md §5: id ``<wid>/<n>`` (n deterministic across replays),
  ``set_event("irq.interrupt", payload)``, ``recv("decision/<id>")`` in short polls (a cancel
  cannot wake a parked ``recv``), then clears the event.
- **Guards tool calls** with irq's policy (``run.tool(name, fn, args, ...)``,
  :mod:`backend_adapters.policy_guard`): the decision is taken in a journaled step
  ``irq.policy:<name>`` (a replay re-uses it, whatever the policy says by then); prohibit
  raises :class:`ToolProhibited` (``fn`` never runs), require_approval raises an interrupt
  naming the rule (reject -> :class:`ToolRejected`), then ``fn`` runs once as the step
  ``<name>`` with the final args and the call's obligations are sent
  (``{run_id}#{call_id}/{rule}``, call_id = the policy step's function id).
- **Heartbeats** from a background thread (so a waiting workflow still beats and a killed
  process goes silent) to the gateway via :mod:`backend_adapters.heartbeat_push`.
- **Releases correctly** on interruption. DBOS raises ``DBOSWorkflowCancelledError`` /
  ``DBOSWorkflowConflictIDError`` (``BaseException``) for both pause and cancel; the agent reads
  the console's ``irq.intent`` attribute (written *before* ``cancel_workflow``) to tell them
  apart: pause releases ``on_pause="release"`` resources and keeps the rest; cancel (or a
  cancel by other tooling, with no intent) releases everything not ``on_cancel="keep"``. When
  the workflow is no longer CANCELLED (a newer execution took over: resume or recovery), it
  releases nothing. Completion and failure release like a cancel.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, TypeVar

from dbos import DBOS
from dbos import error as dbos_error  # public: DBOS exports its error module as ``dbos.error``

from backend_adapters.agent_resources import (
    AcquiredResource,
    ResourceEntry,
    resource_declaration,
)
from backend_adapters.dbos.conventions import (
    ATTR_INTENT,
    ATTR_REPORT,
    ATTR_RUN,
    ATTR_STEP,
    ATTR_WAITING,
    EVENT_INTERRUPT,
    AgentReport,
    RunDeclaration,
    StepMarker,
    decision_topic,
    interrupt_id_for,
)
from backend_adapters.dbos.runtime import (
    AgentRuntime,
    agent_config,
    agent_runtime,
    configure_agent,
)
from backend_adapters.heartbeat_loop import next_seq
from backend_adapters.heartbeat_push import CLIENT, heartbeat_frame
from backend_adapters.interrupt_deadline import Deadline, deadline_delta
from backend_adapters.policy_guard import (
    ToolProhibited,
    ToolRejected,
    approval_request,
    check_call,
    fulfil_obligation,
    open_obligations,
    report_decision,
    shared_policy,
)
from backend_adapters.run_records import Phase, interrupt_payload
from console.policy.model import Obligation, PolicyDecision

log = logging.getLogger("irq.agent.dbos")

R = TypeVar("R")
DecisionType = Literal["approve", "edit", "reject", "respond"]
_DECISION_TYPES: dict[str, DecisionType] = {
    "approve": "approve",
    "edit": "edit",
    "reject": "reject",
    "respond": "respond",
}
_INTERRUPTED = (dbos_error.DBOSWorkflowCancelledError, dbos_error.DBOSWorkflowConflictIDError)

__all__ = [
    "AgentResource",
    "AgentRun",
    "AgentRuntime",
    "DecisionReply",
    "InterruptExpired",
    "ToolProhibited",
    "ToolRejected",
    "agent_config",
    "agent_runtime",
    "configure_agent",
]


def _dict_value(attrs: dict[str, Any], key: str) -> dict[str, Any]:
    """``attrs[key]`` when it is a JSON object, else an empty one (agent-written attributes)."""
    value = attrs.get(key)
    return value if isinstance(value, dict) else {}


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


# ------------------------------------------------------------------------------ resources


class AgentResource(AcquiredResource):
    """Something the run holds, with its pause/cancel policy and how to take and free it.

    ``acquire`` runs on every execution and must be idempotent ("ensure held by this run";
    after a pause a kept resource is still held). ``release`` must be idempotent too.
    """

    def declaration(self) -> ResourceEntry:
        return resource_declaration(self)

    def entry(self) -> ResourceEntry:
        return {**self.declaration(), "state": self.state}


# ------------------------------------------------------------------------------ decisions


class InterruptExpired(Exception):
    """Nobody decided within the interrupt's ``timeout_s``; the interrupt was withdrawn."""

    def __init__(self, interrupt_id: str) -> None:
        super().__init__(f"interrupt {interrupt_id} expired without a decision")
        self.interrupt_id = interrupt_id


@dataclass(frozen=True)
class DecisionReply:
    """The decision the agent received for one interrupt."""

    interrupt_id: str
    type: DecisionType
    args: dict[str, Any]  # what to run with: the edited args for edit, else the proposed ones
    feedback: str | None = None  # reject
    response: Any = None  # respond
    by: str = ""
    command_id: str = ""

    @property
    def approved(self) -> bool:
        return self.type in ("approve", "edit")

    @classmethod
    def from_message(
        cls, message: Any, *, interrupt_id: str, proposed: Mapping[str, Any]
    ) -> DecisionReply:
        data = message if isinstance(message, dict) else {"type": "respond", "response": message}
        kind = _DECISION_TYPES.get(str(data.get("type")))
        if kind is None:
            kind = "reject"
            data = {**data, "feedback": f"unrecognised decision message: {message!r}"[:300]}
        edited = data.get("args") if kind == "edit" else None
        return cls(
            interrupt_id=interrupt_id,
            type=kind,
            args=dict(edited) if isinstance(edited, dict) else dict(proposed),
            feedback=data.get("feedback"),
            response=data.get("response"),
            by=str(data.get("by") or ""),
            command_id=str(data.get("command_id") or ""),
        )


# ------------------------------------------------------------------------------------ run


class AgentRun:
    """The irq side of one execution of a DBOS workflow (use as a context manager inside it)."""

    def __init__(
        self,
        *,
        name: str | None = None,
        resources: Sequence[AgentResource] = (),
        interval_s: float = 2.0,
        timeout_s: float | None = 10.0,
        decision_poll_s: float = 2.0,
        runtime: AgentRuntime | None = None,
        agent: str = "",
        team: str = "",
        policy_wait_s: float = 5.0,
    ) -> None:
        self.name = name
        self.agent = agent  # policy subject: the agent's name (default: the run's name)
        self.team = team
        self.policy_wait_s = policy_wait_s
        #: obligations this execution's guarded calls incurred (same ids on replay)
        self.obligations: list[Obligation] = []
        self.resources = list(resources)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.decision_poll_s = decision_poll_s
        self.runtime = runtime or agent_runtime()
        self.workflow_id = ""
        self.phase: Phase = "running"
        self.progress: float | None = None
        self.details: dict[str, Any] = {}
        self.in_flight_step: str | None = None
        self.waiting_on: str | None = None
        self.next_beat = 0.0
        self._seq = 0
        self._interrupts = 0  # per-execution counter: deterministic across replays
        self._execution = 1  # executions of this workflow that used irq (this one included)
        self._recoveries = 0  # executions that replaced one which died without reporting
        self._lock = threading.Lock()

    # --------------------------------------------------------------------- enter / exit

    def __enter__(self) -> AgentRun:
        wid = DBOS.workflow_id
        if not wid:
            raise RuntimeError("AgentRun must be entered inside a DBOS workflow")
        self.workflow_id = wid
        status = self.runtime.status(wid)
        attrs = status.attributes if status and isinstance(status.attributes, dict) else {}
        intent = _dict_value(attrs, ATTR_INTENT)
        self.details = {
            "pid": os.getpid(),
            "attempt": status.recovery_attempts if status else None,
            "executor_id": status.executor_id if status else None,
        }
        if intent.get("action") == "cancel":
            self._cleanup_after_cancel()  # raises: this execution only exists to clean up
        previous = _dict_value(attrs, ATTR_REPORT)
        # the previous execution never reported an end: it died (crash, SIGKILL, eviction)
        crashed = previous.get("phase") in ("running", "waiting")
        self._execution = int(previous.get("execution") or 0) + 1
        self._recoveries = int(previous.get("recoveries") or 0) + (1 if crashed else 0)
        self.details.update(execution=self._execution, recoveries=self._recoveries)
        self.runtime.register(self)
        try:
            for resource in self.resources:
                if resource.acquire is not None:
                    resource.acquire()
                resource.state = "held"
        except BaseException:
            self._release(lambda r: True)
            self.runtime.unregister(self)
            raise
        declaration: RunDeclaration = {
            "name": self.name or (status.name if status else wid),
            "interval_s": self.interval_s,
            "timeout_s": self.timeout_s,
            "decision_poll_s": self.decision_poll_s,
            "resources": [r.declaration() for r in self.resources],
            "agent": CLIENT,
        }
        self.runtime.write(wid, {ATTR_RUN: dict(declaration), ATTR_REPORT: self._report()})
        self.runtime.pusher.push(self.frame())
        self.next_beat = time.monotonic() + self.interval_s
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        try:
            if exc is None:
                self._finish("completed", _cancel_policy)
            elif isinstance(exc, _INTERRUPTED):
                self._on_interrupted()
            elif isinstance(exc, Exception):
                self._finish("failed", _cancel_policy)
            # KeyboardInterrupt / SystemExit: the process is going down, like a crash: keep
            # everything; the execution is recovered with its resources on restart
        except Exception:
            log.exception("irq cleanup of %s failed", self.workflow_id)
        finally:
            self.runtime.unregister(self)
        return False  # never swallow: DBOS must see its cancellation exceptions

    def _on_interrupted(self) -> None:
        status = self.runtime.status(self.workflow_id)
        if status is None or status.status != "CANCELLED":
            # superseded (resumed or recovered elsewhere): the new execution owns the resources
            log.info(
                "%s: execution superseded (%s); keeping resources",
                self.workflow_id,
                status.status if status else "gone",
            )
            return
        attrs = status.attributes if isinstance(status.attributes, dict) else {}
        intent = _dict_value(attrs, ATTR_INTENT)
        if intent.get("action") == "pause":
            self._finish("paused", _pause_policy)
        else:
            self._finish("cancelled", _cancel_policy)

    def _cleanup_after_cancel(self) -> None:
        """A paused run cancelled by irq is resumed once so it can release what it kept."""
        for resource in self.resources:
            resource.state = "held"  # whatever was kept is still held by this run
        self._finish("cancelled", _cancel_policy)
        self.runtime.client.cancel_workflow(self.workflow_id)
        raise dbos_error.DBOSWorkflowCancelledError(
            f"{self.workflow_id}: cancelled by irq while paused; resources released"
        )

    def _finish(self, phase: Phase, policy: Callable[[AgentResource], bool]) -> None:
        self.phase = phase
        self.waiting_on = None
        if phase == "completed":
            self.in_flight_step = None
        self._release(policy)
        self.runtime.write(self.workflow_id, {ATTR_REPORT: self._report()})
        self.runtime.pusher.push(self.frame())
        log.info(
            "%s %s; resources: %s",
            self.workflow_id,
            phase,
            ", ".join(f"{r.id}={r.state}" for r in self.resources) or "none",
        )

    def _release(self, policy: Callable[[AgentResource], bool]) -> None:
        for resource in reversed(self.resources):
            if resource.state != "held" or not policy(resource):
                continue
            try:
                if resource.release is not None:
                    resource.release()
                resource.state = "released"
            except Exception as exc:
                resource.detail = f"release failed: {exc}"[:200]
                log.exception("%s: releasing %s failed", self.workflow_id, resource.id)

    # --------------------------------------------------------------------------- report

    def _report(self) -> dict[str, Any]:
        report: AgentReport = {
            "phase": self.phase,
            "at": _now_iso(),
            "pid": os.getpid(),
            "resources": [r.entry() for r in self.resources],
            "in_flight_step": self.in_flight_step,
            "execution": self._execution,
            "recoveries": self._recoveries,
        }
        return dict(report)

    def frame(self) -> dict[str, Any]:
        """The next heartbeat frame (seq strictly increasing across executions: epoch ms)."""
        with self._lock:
            self._seq = next_seq(self._seq)
            seq = self._seq
        details = dict(self.details)
        if self.waiting_on:
            details["waiting_on"] = self.waiting_on
        return heartbeat_frame(
            backend="dbos",
            context=self.runtime.context,
            native_id=self.workflow_id,
            seq=seq,
            phase=self.phase,
            progress=self.progress,
            details=details,
            resources=[r.entry() for r in self.resources],
            interval_s=self.interval_s,
            timeout_s=self.timeout_s,
            in_flight_step=self.in_flight_step,
        )

    def set_progress(self, progress: float | None, **details: Any) -> None:
        """Progress (0..1) and details for the next heartbeats (callable from steps)."""
        self.progress = progress
        self.details.update(details)

    # ---------------------------------------------------------------------------- steps

    def step(self, name: str, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run ``fn`` as the DBOS step ``name``, marked in flight while it executes.

        At-least-once: a step interrupted by a crash or a pause runs again, so ``fn`` must be
        idempotent. A journaled step replays its recorded result without running.
        """
        executed = False
        marker: StepMarker = {"name": name}

        def body(*a: Any, **kw: Any) -> R:
            nonlocal executed, marker
            executed = True
            marker = {
                "name": name,
                "function_id": DBOS.step_id or 0,
                "started_at_ms": int(time.time() * 1000),
                "ended_at_ms": None,
            }
            self.in_flight_step = name
            self.runtime.write(self.workflow_id, {ATTR_STEP: dict(marker)})
            return fn(*a, **kw)

        try:
            result = DBOS.run_step({"name": name}, body, *args, **kwargs)
        except Exception:
            if executed:
                self.in_flight_step = None
                ended = {**marker, "ended_at_ms": int(time.time() * 1000), "failed": True}
                self.runtime.write(self.workflow_id, {ATTR_STEP: ended})
            raise
        # BaseException (cancel): the marker stays: the step was not journaled, it re-runs
        if executed:
            self.in_flight_step = None
            ended = {**marker, "ended_at_ms": int(time.time() * 1000)}
            self.runtime.write(self.workflow_id, {ATTR_STEP: ended})
        return result

    # ------------------------------------------------------------------------ interrupts

    def interrupt(
        self,
        title: str,
        *,
        action: str,
        args: Mapping[str, Any] | None = None,
        args_schema: Mapping[str, Any] | None = None,
        description: str = "",
        allowed: Iterable[DecisionType] = ("approve", "edit", "reject"),
        timeout_s: float | None = None,
        policy: Mapping[str, Any] | None = None,
        deadline: Deadline | None = None,
    ) -> DecisionReply:
        """Ask a human and wait (durably) for the decision.

        Polls ``recv`` every ``decision_poll_s`` (each poll is two journal rows; a cancel is
        noticed at the next poll). With ``timeout_s`` the interrupt is withdrawn after that
        many seconds of polls and :class:`InterruptExpired` is raised. ``deadline`` (a
        timedelta or seconds) only publishes ``deadline_at`` = creation + deadline: past it
        irq raises ``interrupt_overdue`` and escalates; the run keeps waiting.
        """
        delta = deadline_delta(deadline)  # a bad deadline fails here, before anything is sent
        self._interrupts += 1
        iid = interrupt_id_for(self.workflow_id, self._interrupts)
        proposed = dict(args or {})
        payload = interrupt_payload(
            iid,
            title,
            description=description,
            action=action,
            args=proposed,
            args_schema=args_schema or None,
            allowed_decisions=allowed,
            created_at=datetime.now(UTC),  # set_event journals the payload: a replay re-uses it
            policy=policy,  # the rule requiring this approval
            deadline=delta,
        )
        self.runtime.write(self.workflow_id, {ATTR_WAITING: iid})
        DBOS.set_event(EVENT_INTERRUPT, dict(payload))
        self.phase, self.waiting_on = "waiting", iid
        polls_left = None if timeout_s is None else max(1, round(timeout_s / self.decision_poll_s))
        message: Any = None
        while message is None:
            message = DBOS.recv(decision_topic(iid), timeout_seconds=self.decision_poll_s)
            if message is None and polls_left is not None:
                polls_left -= 1
                if polls_left <= 0:
                    break
        DBOS.set_event(EVENT_INTERRUPT, None)
        self.runtime.write(self.workflow_id, {ATTR_WAITING: None})
        self.phase, self.waiting_on = "running", None
        if message is None:
            raise InterruptExpired(iid)
        return DecisionReply.from_message(message, interrupt_id=iid, proposed=proposed)

    # ---------------------------------------------------------------------- policy guard

    def tool(
        self,
        name: str,
        fn: Callable[..., R],
        args: Mapping[str, Any],
        *,
        data: Iterable[str] = (),
        sensitive: bool = False,
        args_schema: Mapping[str, Any] | None = None,
        title: str | None = None,
    ) -> R:
        """Call ``fn(**args)`` as the step ``name`` if irq's policy allows it.

        The decision is taken in the journaled step ``irq.policy:<name>`` (a replay re-uses
        it) and reported to the gateway. prohibit -> :class:`ToolProhibited`, ``fn`` never
        runs. require_approval -> an interrupt (action ``name``, ``args``, the rule in its
        ``policy``); reject (or a respond) -> :class:`ToolRejected`, ``fn`` never runs;
        approve / edit -> ``fn`` runs once with the final args. After the call its
        obligations are sent: ``open`` (due ``within_s`` after the decision) or ``waived`` by
        a dispensation. ``data``: the datasets or data classes the call touches;
        ``sensitive``: fail closed when this process has no policy.
        """
        proposed = dict(args)
        checked: dict[str, Any] = DBOS.run_step(
            {"name": f"irq.policy:{name}"},
            self._check_tool,
            name,
            proposed,
            list(data),
            sensitive,
        )
        decision = PolicyDecision.model_validate(checked["decision"])
        call_id = str(checked["call_id"])
        decided_at = datetime.fromisoformat(str(checked["at"]))
        context, native_id = self.runtime.context, self.workflow_id
        # reported from workflow code, so a replay re-sends it (the gateway keeps one)
        report_decision(
            decision,
            tool=name,
            call_id=call_id,
            backend="dbos",
            context=context,
            native_id=native_id,
            at=decided_at,
            pusher=self.runtime.pusher,
        )
        if decision.outcome == "prohibit":
            raise ToolProhibited(decision, name)
        final_args = proposed
        if decision.outcome == "require_approval":
            request = approval_request(
                name, proposed, decision, args_schema=args_schema, title=title
            )
            reply = self.interrupt(
                request.title,
                action=request.action,
                args=request.args,
                args_schema=request.args_schema,
                description=request.description,
                allowed=[
                    _DECISION_TYPES[d] for d in request.allowed_decisions if d in _DECISION_TYPES
                ],
                policy=request.policy,
            )
            if not reply.approved:
                feedback = reply.feedback if reply.type == "reject" else _text(reply.response)
                raise ToolRejected(feedback, name, decision)
            final_args = reply.args
        result = self.step(name, fn, **final_args)
        if decision.obligations or decision.waived:
            engine = shared_policy().engine()
            self.obligations += open_obligations(
                decision,
                tool=name,
                call_id=call_id,
                backend="dbos",
                context=context,
                native_id=native_id,
                at=decided_at,
                policy=engine.policy if engine is not None else None,
                pusher=self.runtime.pusher,
            )
        return result

    def _check_tool(
        self, name: str, args: dict[str, Any], data: list[str], sensitive: bool
    ) -> dict[str, Any]:
        """The body of the ``irq.policy:<name>`` step: its result is journaled."""
        call_id = str(DBOS.step_id or 0)
        at = datetime.now(UTC)
        decision = check_call(
            name,
            args,
            data=data,
            agent=self.agent or self.name or "",
            team=self.team,
            backend="dbos",
            context=self.runtime.context,
            native_id=self.workflow_id,
            sensitive=sensitive,
            wait_s=self.policy_wait_s,
            at=at,
            pusher=self.runtime.pusher,
        )
        return {
            "decision": decision.model_dump(mode="json"),
            "call_id": call_id,
            "at": at.isoformat(),
        }

    def fulfil(self, obligation_id: str, note: str = "") -> None:
        """Tell the gateway this run fulfilled ``obligation_id`` (an id :meth:`tool`
        opened); sent again on replay (the gateway keeps the first)."""
        fulfil_obligation(
            obligation_id,
            note,
            backend="dbos",
            context=self.runtime.context,
            native_id=self.workflow_id,
            pusher=self.runtime.pusher,
        )

    def ask(
        self,
        question: str,
        *,
        description: str = "",
        timeout_s: float | None = None,
        deadline: Deadline | None = None,
    ) -> DecisionReply:
        """An ask-the-user interrupt: the human's ``respond`` answer is the result."""
        return self.interrupt(
            question,
            action="ask_user",
            args={"question": question},
            description=description,
            allowed=("respond", "reject"),
            timeout_s=timeout_s,
            deadline=deadline,
        )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _pause_policy(resource: AgentResource) -> bool:
    return resource.on_pause in ("release", "snapshot")  # a snapshot is saved, then freed


def _cancel_policy(resource: AgentResource) -> bool:
    return resource.on_cancel == "release"
