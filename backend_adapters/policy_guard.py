"""The agent-side policy guard every backend's helpers share: check a tool call against the
policy the gateway distributed, locally, and report what was decided.

The gateway sends ``{"type": "policy", "version", "policy"}`` on the agent channel after the
agent's hello and after every reload; the heartbeat pusher hands each one to
:func:`shared_policy` (:class:`PolicyCache`), which builds a :class:`PolicyEngine` once per
version. :func:`check_call` evaluates a call against it in-process: no round trip per call.

**No policy** (nothing received within ``wait_s`` of the process's first check, no gateway
configured, or the gateway said ``policy: null``): a call marked ``sensitive=True`` at the
call site, or a tool the last policy this process knew marked sensitive (a ``sensitive =
true`` rule naming it), is **prohibited** (fails closed); any other call is **permitted**
(fails open). Either way the decision has ``winner`` None and says why in its explanation
(``"no policy received: sensitive tool fails closed"`` /
``"no policy received: permitted (not a sensitive tool)"``). Only the first check of a
process waits (up to ``wait_s``, while the pusher connects and the policy frame arrives);
later checks use what is there.

What the helpers do with a decision (DBOS ``AgentRun.tool``, Temporal/LangGraph/Restate
guards):

- ``prohibit``: :func:`report_decision`, raise :class:`ToolProhibited`; the tool never runs.
- ``require_approval``: raise an interrupt built by :func:`approval_request` (action = the
  tool, its args and schema, the rule's allowed decisions, ``policy`` = :func:`interrupt_policy`
  so the console shows the rule); reject -> :class:`ToolRejected`, the tool never runs;
  approve/edit -> the tool runs once with the final args.
- ``permit``: the tool runs.
- After a call that ran: :func:`open_obligations` sends one ``obligation`` event per standing
  obligation (``open``, ``due_at`` = decided at + ``within_s``) and per waived one
  (``waived``, ``by`` = the dispense rule). Ids are ``{run_id}#{call_id}/{rule}``: the helper
  passes a ``call_id`` that a replay reproduces, so a re-sent obligation is the same one.
- :func:`fulfil_obligation` sends ``obligation_fulfilled``.

Every decision is reported as a ``decision`` event. Events go through
:meth:`HeartbeatPusher.send_event` (FIFO, at-least-once across reconnects; the gateway is
idempotent by obligation id and by (run, call_id, tool)).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from backend_adapters.heartbeat_push import HeartbeatPusher, set_policy_sink, shared_pusher
from console.policy.engine import PolicyEngine
from console.policy.model import (
    Invocation,
    Obligation,
    Policy,
    PolicyDecision,
)

log = logging.getLogger("irq.agent.policy")

NO_POLICY_CLOSED = "no policy received: sensitive tool fails closed"
NO_POLICY_OPEN = "no policy received: permitted (not a sensitive tool)"
DEFAULT_WAIT_S = 5.0
DEFAULT_DECISIONS = ["approve", "edit", "reject"]

__all__ = [
    "NO_POLICY_CLOSED",
    "NO_POLICY_OPEN",
    "ApprovalRequest",
    "PolicyCache",
    "ToolProhibited",
    "ToolRejected",
    "approval_request",
    "args_schema_for",
    "check_call",
    "decision_event",
    "fulfil_obligation",
    "interrupt_policy",
    "obligations_for",
    "open_obligations",
    "report_decision",
    "run_id_for",
    "shared_policy",
]


# ----------------------------------------------------------------------------- exceptions


class ToolProhibited(Exception):
    """The policy prohibits this tool call; the tool did not run (``.decision`` says why)."""

    def __init__(self, decision: PolicyDecision, tool: str = "") -> None:
        by = f"rule {decision.winner}" if decision.winner else "no rule"
        why = "; ".join(decision.explanation[:2])
        super().__init__(f"{tool or 'tool call'} prohibited by {by}" + (f": {why}" if why else ""))
        self.decision = decision
        self.tool = tool


class ToolRejected(Exception):
    """A human rejected the tool call the policy sent for approval; the tool did not run
    (``.feedback``: the reviewer's text, or None)."""

    def __init__(
        self, feedback: str | None, tool: str = "", decision: PolicyDecision | None = None
    ) -> None:
        what = f"{tool} rejected" if tool else "tool call rejected"
        super().__init__(what + (f": {feedback}" if feedback else ""))
        self.feedback = feedback
        self.tool = tool
        self.decision = decision


# ---------------------------------------------------------------------------------- cache


class PolicyCache:
    """The policy this process last received from the gateway, compiled once per version."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._engine: PolicyEngine | None = None
        self._last_engine: PolicyEngine | None = None  # kept after ``policy: null``
        self._first_check: float | None = None  # monotonic time of the first check_call
        self.received = False  # a policy frame (a policy, or null) was applied
        self.version: str | None = None
        self.error: str | None = None  # why the last policy frame was not applied

    def update(self, frame: Mapping[str, Any]) -> None:
        """Apply a gateway ``policy`` frame. An invalid policy is logged and ignored (the
        previous one stays); ``policy: null`` means the gateway has none."""
        raw = frame.get("policy")
        engine: PolicyEngine | None = None
        if raw is not None:
            if self._engine is not None and frame.get("version") == self._engine.version:
                with self._cond:
                    self.received = True
                    self._cond.notify_all()
                return  # the same policy again (a reconnect): keep the compiled engine
            try:
                engine = PolicyEngine(Policy.model_validate(raw))
            except (ValidationError, ValueError) as exc:
                self.error = f"policy frame {frame.get('version')!r} not applied: {exc}"[:500]
                log.error("%s", self.error)
                return
        self.set_engine(engine)

    def set_policy(self, policy: Policy | None) -> None:
        """Install ``policy`` directly (embedding, tests); None = the gateway has none."""
        self.set_engine(PolicyEngine(policy) if policy is not None else None)

    def set_engine(self, engine: PolicyEngine | None) -> None:
        with self._cond:
            self._engine = engine
            if engine is not None:
                self._last_engine = engine
            self.version = engine.version if engine is not None else None
            self.error = None
            self.received = True
            self._cond.notify_all()
        log.info("policy %s applied", self.version or "null (none)")

    def engine(self) -> PolicyEngine | None:
        return self._engine

    def wait(self, timeout_s: float) -> bool:
        """Wait until a policy frame was applied; False after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self.received:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def wait_first(self, wait_s: float) -> bool:
        """Wait for the policy until ``wait_s`` after the process's first check (later checks
        of a process that never got one do not wait again)."""
        with self._cond:
            if self._first_check is None:
                self._first_check = time.monotonic()
            remaining = self._first_check + wait_s - time.monotonic()
        return self.wait(max(0.0, remaining))

    def is_sensitive(self, tool: str) -> bool:
        """Whether the last policy this process knew marks ``tool`` sensitive."""
        engine = self._engine or self._last_engine
        return engine is not None and engine.is_sensitive(tool)

    def reset(self) -> None:
        """Forget everything (tests)."""
        with self._cond:
            self._engine = self._last_engine = None
            self._first_check = None
            self.received = False
            self.version = self.error = None


_shared = PolicyCache()


def shared_policy() -> PolicyCache:
    """The process-wide policy cache the heartbeat pusher feeds."""
    return _shared


set_policy_sink(_shared.update)  # every pusher of this process feeds the cache


# ---------------------------------------------------------------------------------- check


def run_id_for(backend: str, context: str | None, native_id: str) -> str:
    """The console's run id (``backend:context/native_id``) the obligation ids start with;
    the context is empty when the agent does not know it (set ``IRQ_AGENT_CONTEXT``)."""
    return f"{backend}:{context or ''}/{native_id}"


def _run_fields(backend: str, context: str | None, native_id: str) -> dict[str, Any]:
    return {"backend": backend, "context": context, "native_id": native_id}


def _no_policy(tool: str, *, sensitive: bool, cache: PolicyCache) -> PolicyDecision:
    if cache.received:
        why = "the gateway has no policy loaded (policy: null)"
    elif cache.error:
        why = cache.error
    else:
        why = "no policy frame from the gateway (none configured, unreachable, or too slow)"
    if sensitive or cache.is_sensitive(tool):
        marked = "marked sensitive at the call site" if sensitive else "a sensitive tool"
        return PolicyDecision(
            outcome="prohibit",
            explanation=[NO_POLICY_CLOSED, f"{why}; {tool} is {marked}"],
        )
    return PolicyDecision(outcome="permit", explanation=[NO_POLICY_OPEN, why])


def check_call(
    tool: str,
    args: Mapping[str, Any],
    *,
    data: Iterable[str] = (),
    agent: str = "",
    team: str = "",
    backend: str = "",
    context: str | None = None,
    native_id: str = "",
    sensitive: bool = False,
    wait_s: float = DEFAULT_WAIT_S,
    at: datetime | None = None,
    cache: PolicyCache | None = None,
    pusher: HeartbeatPusher | None = None,
) -> PolicyDecision:
    """The policy's decision on calling ``tool`` with ``args`` (local; see the module doc for
    what happens without a policy)."""
    cache = cache or shared_policy()
    if not cache.received:
        if (pusher or shared_pusher()).ensure_connected():
            cache.wait_first(wait_s)
    engine = cache.engine()
    if engine is None:
        return _no_policy(tool, sensitive=sensitive, cache=cache)
    invocation = Invocation(
        on="tool",
        tool=tool,
        args=dict(args),
        agent=agent,
        team=team,
        backend=backend,
        context=context or "",
        run_id=run_id_for(backend, context, native_id) if native_id else "",
        data=list(data),
        at=at or datetime.now(UTC),
    )
    try:
        return engine.evaluate(invocation)
    except Exception as exc:  # an engine bug must not decide silently: as if no policy
        log.exception("policy evaluation of %s failed", tool)
        decision = _no_policy(tool, sensitive=sensitive, cache=cache)
        decision.explanation.append(f"policy evaluation failed: {exc}"[:300])
        return decision


# ------------------------------------------------------------------------------- approval


def args_schema_for(args: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema for ``args`` derived from their JSON types (every key required)."""

    def of(value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"type": "boolean"}
        if isinstance(value, int):
            return {"type": "integer"}
        if isinstance(value, float):
            return {"type": "number"}
        if isinstance(value, str):
            return {"type": "string"}
        if isinstance(value, Mapping):
            return {"type": "object"}
        if isinstance(value, list | tuple):
            return {"type": "array"}
        return {}

    return {
        "type": "object",
        "properties": {str(k): of(v) for k, v in args.items()},
        "required": [str(k) for k in args],
    }


def interrupt_policy(decision: PolicyDecision) -> dict[str, Any]:
    """The interrupt payload's ``policy`` for a ``require_approval`` decision:
    ``{rule, why, decide_role, approvers, policy_version}``, and ``deadline_s`` /
    ``default_decision`` when the rule has them."""
    approval = decision.approval
    if approval is None:  # the policy's default outcome, no rule
        return {
            "rule": decision.winner or "default",
            "why": "the policy's default outcome is require_approval",
            "decide_role": "operator",
            "approvers": 1,
            "policy_version": decision.policy_version,
        }
    policy: dict[str, Any] = {
        "rule": approval.rule,
        "why": approval.description,
        "decide_role": approval.decide_role,
        "approvers": approval.approvers,
        "policy_version": decision.policy_version,
    }
    if approval.deadline_s is not None:  # the interrupt's deadline_at counts from its creation
        policy["deadline_s"] = approval.deadline_s
    if approval.default_decision is not None:
        policy["default_decision"] = approval.default_decision
    return policy


@dataclass(frozen=True)
class ApprovalRequest:
    """The interrupt a ``require_approval`` decision raises (each backend's ``ask`` takes
    these fields)."""

    title: str
    description: str
    action: str
    args: dict[str, Any]
    args_schema: dict[str, Any]
    allowed_decisions: list[str]
    policy: dict[str, Any]


def approval_request(
    tool: str,
    args: Mapping[str, Any],
    decision: PolicyDecision,
    *,
    args_schema: Mapping[str, Any] | None = None,
    title: str | None = None,
) -> ApprovalRequest:
    policy = interrupt_policy(decision)
    decisions = list(decision.approval.decisions) if decision.approval else DEFAULT_DECISIONS
    return ApprovalRequest(
        title=title or f"{tool}: approval required by {policy['rule']}",
        description=policy["why"],
        action=tool,
        args=dict(args),
        args_schema=dict(args_schema) if args_schema else args_schema_for(args),
        allowed_decisions=decisions,
        policy=policy,
    )


# --------------------------------------------------------------------------------- events


def _iso(at: datetime | None) -> str:
    return (at or datetime.now(UTC)).isoformat()


def decision_event(
    decision: PolicyDecision,
    *,
    tool: str,
    call_id: str,
    backend: str,
    context: str | None,
    native_id: str,
    at: datetime | None = None,
) -> dict[str, Any]:
    """The ``decision`` policy_event frame of one guarded call."""
    return {
        "type": "policy_event",
        "event": "decision",
        **_run_fields(backend, context, native_id),
        "call_id": call_id,
        "at": _iso(at),
        "tool": tool,
        "decision": decision.model_dump(mode="json"),
    }


def report_decision(
    decision: PolicyDecision,
    *,
    tool: str,
    call_id: str,
    backend: str,
    context: str | None,
    native_id: str,
    at: datetime | None = None,
    pusher: HeartbeatPusher | None = None,
) -> None:
    """Send the ``decision`` event for one guarded call (``call_id`` stable on replay)."""
    frame = decision_event(
        decision,
        tool=tool,
        call_id=call_id,
        backend=backend,
        context=context,
        native_id=native_id,
        at=at,
    )
    (pusher or shared_pusher()).send_event(frame)


def obligations_for(
    decision: PolicyDecision,
    *,
    call_id: str,
    backend: str,
    context: str | None,
    native_id: str,
    tool: str = "",
    at: datetime | None = None,
    policy: Policy | None = None,
) -> list[Obligation]:
    """The obligations a call decided by ``decision`` incurs: one ``open`` per standing
    obligation (``due_at`` = ``at`` + ``within_s``) and one ``waived`` per waiver (``by`` =
    the dispense rule; ``what`` from ``policy``, by default the cached one). ``at`` is when
    the call was decided: a replay that passes the recorded time builds the same obligation.
    Ids: ``{run_id}#{call_id}/{rule}``."""
    created = at or datetime.now(UTC)
    run_id = run_id_for(backend, context, native_id)
    prefix = f"{run_id}#{call_id}/"
    out = [
        Obligation(
            id=prefix + spec.rule,
            rule=spec.rule,
            run_id=run_id,
            what=spec.what,
            created_at=created,
            due_at=created + timedelta(seconds=spec.within_s) if spec.within_s else None,
            state="open",
            tool=tool,
            policy_version=decision.policy_version,
        )
        for spec in decision.obligations
    ]
    if decision.waived:
        if policy is None:
            engine = shared_policy().engine()
            policy = engine.policy if engine is not None else None
        whats = {r.id: r.what for r in policy.rules} if policy is not None else {}
        out += [
            Obligation(
                id=prefix + waiver.obligation_rule,
                rule=waiver.obligation_rule,
                run_id=run_id,
                what=whats.get(waiver.obligation_rule) or waiver.obligation_rule,
                created_at=created,
                due_at=None,
                state="waived",
                by=waiver.by,
                tool=tool,
                policy_version=decision.policy_version,
            )
            for waiver in decision.waived
        ]
    return out


def open_obligations(
    decision: PolicyDecision,
    *,
    call_id: str,
    backend: str,
    context: str | None,
    native_id: str,
    tool: str = "",
    at: datetime | None = None,
    policy: Policy | None = None,
    pusher: HeartbeatPusher | None = None,
) -> list[Obligation]:
    """Send an ``obligation`` event per obligation of :func:`obligations_for` (call it after
    the tool ran); returns them."""
    obligations = obligations_for(
        decision,
        call_id=call_id,
        backend=backend,
        context=context,
        native_id=native_id,
        tool=tool,
        at=at,
        policy=policy,
    )
    sender = pusher or shared_pusher()
    if obligations and not context:
        _warn_no_context(backend)
    for obligation in obligations:
        sender.send_event(
            {
                "type": "policy_event",
                "event": "obligation",
                **_run_fields(backend, context, native_id),
                "obligation": obligation.model_dump(mode="json"),
            }
        )
    return obligations


_warned_no_context: set[str] = set()


def _warn_no_context(backend: str) -> None:
    if backend not in _warned_no_context:
        _warned_no_context.add(backend)
        log.warning(
            "obligations of %s runs name no context: the gateway refuses an obligation whose "
            "id does not name the run it resolved; set IRQ_AGENT_CONTEXT",
            backend,
        )


def fulfil_obligation(
    obligation_id: str,
    note: str = "",
    *,
    backend: str,
    context: str | None,
    native_id: str,
    pusher: HeartbeatPusher | None = None,
) -> None:
    """Tell the gateway the agent fulfilled ``obligation_id`` (``obligation_fulfilled``)."""
    (pusher or shared_pusher()).send_event(
        {
            "type": "policy_event",
            "event": "obligation_fulfilled",
            **_run_fields(backend, context, native_id),
            "id": obligation_id,
            "note": note,
        }
    )
