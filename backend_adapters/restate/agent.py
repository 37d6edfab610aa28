"""Agent-side helpers for ``restate-sdk`` handlers (no irq server code is imported).

:func:`ask` raises an interrupt in irq's convention (``conventions.py``): it creates an
awakeable, publishes the pending interrupt as the result of a ``ctx.run`` named
``irq:interrupt`` (journaled, so replays publish nothing new), then awaits the decision::

    from backend_adapters.restate.agent import ask

    @svc.handler()
    async def wire(ctx: restate.Context, req: dict) -> dict:
        decision = await ask(ctx, "Wire funds?", action="wire", args={"amount": 10},
                             args_schema={"type": "object", "required": ["amount"]},
                             allowed_decisions=["approve", "edit", "reject"])
        if decision["type"] == "reject": ...

The decision is irq's common payload ``{"type", "args"?, "feedback"?, "response"?}``.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, cast

from restate import Context, TerminalError

from backend_adapters.agent_resources import ResourceEntry, resource_entry
from backend_adapters.heartbeat_loop import HeartbeatLoop, next_seq
from backend_adapters.heartbeat_push import HeartbeatPusher, heartbeat_frame, shared_pusher
from backend_adapters.interrupt_deadline import Deadline, deadline_delta
from backend_adapters.restate.conventions import BACKEND, INTERRUPT_STEP, PublishedInterrupt
from backend_adapters.run_records import Phase, interrupt_payload

log = logging.getLogger("irq.agent.restate")
#: the irq context name of this Restate server (``restate:<context>``), default ``local``
ENV_CONTEXT = "IRQ_RESTATE_CONTEXT"

DEFAULT_DECISIONS = ("approve", "reject")


async def ask(
    ctx: Context,
    title: str,
    *,
    action: str = "",
    args: dict[str, Any] | None = None,
    args_schema: dict[str, Any] | None = None,
    allowed_decisions: tuple[str, ...] | list[str] = DEFAULT_DECISIONS,
    description: str = "",
    interrupt_id: str = "",
    policy: dict[str, Any] | None = None,
    deadline: Deadline | None = None,
) -> dict[str, Any]:
    """Publish a pending interrupt and wait durably for irq's decision on it. ``policy``:
    the rule that requires it (``policy_guard``'s interrupt policy), shown in the inbox.
    ``deadline`` (a timedelta or seconds) publishes ``deadline_at`` = creation + deadline,
    computed inside the journaled ``ctx.run`` like ``created_at`` (a replay re-uses both):
    past it irq raises ``interrupt_overdue``; the handler keeps waiting."""
    delta = deadline_delta(deadline)
    awakeable_id, future = ctx.awakeable(type_hint=dict)

    def publish() -> dict[str, Any]:
        payload = interrupt_payload(
            interrupt_id or awakeable_id,
            title,
            description=description,
            action=action,
            args=args,
            args_schema=args_schema,
            allowed_decisions=allowed_decisions,
            created_at=datetime.now(UTC),  # inside the journaled ctx.run: a replay re-uses it
            policy=policy,
            deadline=delta,
        )
        published: PublishedInterrupt = {"awakeable_id": awakeable_id, **payload}
        return dict(published)

    await ctx.run_typed(INTERRUPT_STEP, publish)
    return cast(dict[str, Any], await future)


# ------------------------------------------------------------------ heartbeats, resources

@dataclass
class AgentResource:
    """Something the handler holds, with its pause/cancel policy and how to free it.
    ``release`` must be idempotent (a handler body runs again on every retry)."""

    id: str
    kind: str = "resource"
    on_pause: Literal["keep", "release", "snapshot"] = "keep"  # snapshot: saved, released
    on_cancel: Literal["release", "keep"] = "release"
    detail: str = ""
    release: Callable[[], Any] | None = None
    state: Literal["held", "released"] = "held"

    def entry(self) -> ResourceEntry:
        return resource_entry(self)


class AgentRun:
    """The irq side of one handler attempt: heartbeats to the gateway from a background
    thread (so a hung or frozen handler goes silent and irq says ``late`` in seconds, where
    Restate waits for its inactivity + abort timeouts), declared resources, and their release
    when the invocation is cancelled (``TerminalError`` at an await)::

        async def handler(ctx: restate.Context, req: dict) -> dict:
            async with AgentRun(ctx, resources=[gpu], interval_s=2) as run:
                ...
                run.beat(progress=0.5)

    The agent token comes from ``IRQ_AGENT_URL`` / ``IRQ_AGENT_TOKEN`` (heartbeat_push.py);
    its scope must cover ``restate:<context>``.
    """

    def __init__(
        self,
        ctx: Context,
        *,
        name: str = "",
        resources: list[AgentResource] | None = None,
        interval_s: float = 2.0,
        timeout_s: float | None = None,
        context: str | None = None,
        pusher: HeartbeatPusher | None = None,
    ) -> None:
        self.native_id = ctx.request().id
        self.name = name
        self.resources = list(resources or [])
        self.interval_s = interval_s
        self.timeout_s = timeout_s if timeout_s is not None else max(3 * interval_s, 5.0)
        self.context = context if context is not None else (os.environ.get(ENV_CONTEXT) or None)
        self._pusher = pusher
        self._seq = 0
        self._progress: float | None = None
        self._details: dict[str, Any] = {}
        self._beats = HeartbeatLoop(self._push, name="irq-restate-beat")
        self.phase: Phase = "running"

    def frame(self) -> dict[str, Any]:
        self._seq = next_seq(self._seq)
        return heartbeat_frame(
            backend=BACKEND,
            context=self.context,
            native_id=self.native_id,
            seq=self._seq,
            phase=self.phase,
            progress=self._progress,
            details={"name": self.name, **self._details},
            resources=[r.entry() for r in self.resources],
            interval_s=self.interval_s,
            timeout_s=self.timeout_s,
        )

    def _push(self) -> None:
        (self._pusher or shared_pusher()).push(self.frame())

    def beat(self, progress: float | None = None, **details: Any) -> None:
        if progress is not None:
            self._progress = progress
        self._details.update(details)
        self._push()

    async def __aenter__(self) -> AgentRun:
        self._push()
        self._beats.start(self.interval_s)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._beats.stop()
        if exc is None:
            phase: Phase = "completed"
        elif isinstance(exc, TerminalError):
            phase = "cancelled" if "cancel" in str(exc).lower() else "failed"
        else:  # suspension or a retryable error: Restate runs the handler again
            phase = "waiting"
        self.phase = phase
        if phase in ("completed", "cancelled", "failed"):  # the run is over: as on DBOS,
            # what it does not keep past its end is released, not reported held forever
            for resource in self.resources:
                if resource.on_cancel != "release" or resource.state == "released":
                    continue
                try:
                    if resource.release is not None:
                        resource.release()
                    resource.state = "released"
                except Exception:  # reported as held: the console flags what was not freed
                    log.exception("releasing %s failed", resource.id)
        self._push()


# ------------------------------------------------------------------ policy guard


class ToolProhibitedError(TerminalError):
    """The policy prohibits the tool call (the tool did not run). Terminal: Restate does not
    retry it; ``decision`` is the ``PolicyDecision`` as a dict."""

    def __init__(self, tool: str, decision: dict[str, Any]) -> None:
        super().__init__(f"{tool}: prohibited by {decision.get('winner') or 'the policy default'}")
        self.tool = tool
        self.decision = decision


class ToolRejectedError(TerminalError):
    """An operator rejected the tool call the policy put to approval (the tool did not run)."""

    def __init__(self, tool: str, rule: str, feedback: str | None) -> None:
        super().__init__(f"{tool}: rejected under {rule}" + (f": {feedback}" if feedback else ""))
        self.tool = tool
        self.rule = rule
        self.feedback = feedback


#: tool calls per handler attempt (a retry replays from the start with a new context)
_tool_calls: weakref.WeakKeyDictionary[Context, int] = weakref.WeakKeyDictionary()
#: obligation ids the guarded calls of a handler attempt opened (journaled results)
_opened: weakref.WeakKeyDictionary[Context, list[str]] = weakref.WeakKeyDictionary()


def opened_obligations(ctx: Context) -> list[str]:
    """Ids of the obligations this handler's guarded calls opened so far."""
    return list(_opened.get(ctx, []))


async def fulfil_obligation(ctx: Context, obligation_id: str, note: str = "") -> None:
    """Tell the gateway the handler fulfilled ``obligation_id`` (in a journaled ``ctx.run``,
    so a replay does not send it again)."""
    from backend_adapters import policy_guard

    native_id = ctx.request().id
    where = os.environ.get(ENV_CONTEXT) or "local"

    def send() -> None:
        policy_guard.fulfil_obligation(
            obligation_id, note, backend=BACKEND, context=where, native_id=native_id
        )

    await ctx.run_typed(f"irq.fulfil:{obligation_id.rpartition('#')[2]}", send)


async def guarded_tool(
    ctx: Context,
    tool: str,
    args: dict[str, Any],
    fn: Callable[..., Any],
    *,
    agent: str,
    team: str = "",
    data: tuple[str, ...] | list[str] = (),
    sensitive: bool = False,
    args_schema: dict[str, Any] | None = None,
    context: str | None = None,
) -> Any:
    """Call ``fn(**args)`` as a journaled ``ctx.run`` step if irq's policy allows it.

    The decision is taken inside ``ctx.run`` (``irq.policy:<tool>#<n>``) so the journal
    records it and a replay re-uses it; prohibit -> :class:`ToolProhibitedError` (``fn``
    never runs); require_approval -> :func:`ask` with the rule in the interrupt, reject ->
    :class:`ToolRejectedError`, approve / edit -> ``fn`` runs once with the final args; the
    obligations of the call are opened after it (call id = ``t<n>``, n counting the guarded
    calls of this handler attempt, deterministic on replay).
    """
    from backend_adapters import policy_guard
    from console.policy.model import PolicyDecision

    n = _tool_calls.get(ctx, 0) + 1
    _tool_calls[ctx] = n
    call_id = f"t{n}"
    native_id = ctx.request().id
    where = context if context is not None else (os.environ.get(ENV_CONTEXT) or "local")

    def check() -> dict[str, Any]:
        taken = policy_guard.check_call(
            tool,
            dict(args),
            data=list(data),
            agent=agent,
            team=team,
            backend=BACKEND,
            context=where,
            native_id=native_id,
            sensitive=sensitive,
        )
        policy_guard.report_decision(
            taken, tool=tool, backend=BACKEND, context=where, native_id=native_id, call_id=call_id
        )
        dumped: dict[str, Any] = taken.model_dump(mode="json")
        return dumped

    raw = await ctx.run_typed(f"irq.policy:{call_id}", check)
    decision = PolicyDecision.model_validate(raw)
    if decision.outcome == "prohibit":
        raise ToolProhibitedError(tool, raw)
    final_args = dict(args)
    if decision.outcome == "require_approval":
        asked = policy_guard.approval_request(tool, final_args, decision, args_schema=args_schema)
        answer = await ask(
            ctx,
            asked.title,
            action=tool,
            args=final_args,
            args_schema=asked.args_schema,
            allowed_decisions=asked.allowed_decisions,
            description=asked.description,
            interrupt_id=f"{tool}-{call_id}",
            policy=asked.policy,
        )
        kind = answer.get("type")
        if kind not in ("approve", "edit"):
            feedback = answer.get("feedback") or answer.get("response")
            raise ToolRejectedError(tool, str(asked.policy["rule"]), feedback)
        if kind == "edit" and isinstance(answer.get("args"), dict):
            final_args = dict(answer["args"])
    result = await ctx.run_typed(tool, fn, **final_args)

    def record() -> list[str]:
        opened = policy_guard.open_obligations(
            decision,
            tool=tool,
            backend=BACKEND,
            context=where,
            native_id=native_id,
            call_id=call_id,
        )
        return [o.id for o in opened]

    if decision.obligations or decision.waived:
        opened = await ctx.run_typed(f"irq.obligations:{call_id}", record)
        _opened.setdefault(ctx, []).extend(opened)
    return result
