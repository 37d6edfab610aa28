"""Agent-side helpers for LangGraph graphs that irq observes and controls.

A graph needs none of this to show up in irq: ``interrupt()`` with the Agent Inbox shape, the
``HumanInTheLoopMiddleware`` shape or any value is already an inbox item (README.md). The
helpers add what LangGraph lacks::

    from backend_adapters.langgraph.agent import AgentResource, AgentRun, ask, ToolCallReview

    def review(state: State) -> State:
        reply = ask("send_email", state["draft"], description="Send this email?",
                    args_schema=EMAIL_SCHEMA, allowed=("approve", "edit", "reject"))
        return {"send": reply.approved, "args": reply.args, "feedback": reply.text}

    def train(state: State) -> State:
        gpu = AgentResource("gpu-0", kind="gpu", on_pause="keep", acquire=take, release=free)
        with AgentRun(name="train", resources=[gpu], interval_s=2, timeout_s=10) as run:
            for step in range(100):
                if run.stop_requested():   # a sync node is not stopped by a cancel: ask
                    break
                do_step(step)
                run.beat(progress=step / 100)
        return {...}

- :func:`inbox_request` / :func:`ask`: an interrupt in the Agent Inbox ``HumanInterrupt``
  shape, with ``args_schema`` (a JSON Schema for edits; checked when it is raised) and the
  allowed decisions as ``config.allow_*`` flags; the reply parsed as a :class:`HumanReply`.
- :class:`ToolCallReview` / :func:`review_tools`: the ``HumanInTheLoopMiddleware`` shape
  (``action_requests`` + ``review_configs``), for graphs that want its decision vocabulary
  (reject and respond are different values there; in the Agent Inbox shape both arrive as
  ``response``).
- :class:`AgentRun`: declares the node's resources with their pause/cancel policies, pushes
  heartbeats from a background thread to the gateway's agent channel
  (``backend_adapters.heartbeat_push``: ``IRQ_AGENT_URL``, ``IRQ_AGENT_TOKEN``,
  ``IRQ_AGENT_CONTEXT``), and on the way out releases what the policy says: irq's pause
  releases ``on_pause="release"`` resources, a cancel, completion or failure everything not
  ``on_cancel="keep"``; an ``interrupt()`` inside the block keeps everything (the node runs
  again from its start when it is resumed, so ``acquire`` must mean "ensure held").
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx

from backend_adapters.agent_resources import AcquiredResource
from backend_adapters.heartbeat_loop import HeartbeatLoop, next_seq
from backend_adapters.heartbeat_push import HeartbeatPusher, heartbeat_frame, shared_pusher
from backend_adapters.interrupt_deadline import Deadline, deadline_at_iso
from backend_adapters.langgraph.conventions import BACKEND, KEY_ARGS_SCHEMA, META_INTENT
from backend_adapters.run_records import Phase
from console.decision_check import schema_problem

log = logging.getLogger("irq.agent.langgraph")

DecisionName = Literal["approve", "edit", "reject", "respond"]
ALL: tuple[DecisionName, ...] = ("approve", "edit", "reject", "respond")
ENV_CONTEXT = "IRQ_AGENT_CONTEXT"
R = TypeVar("R")

if TYPE_CHECKING:
    from console.policy.model import PolicyDecision


def _checked_schema(args_schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if args_schema is None:
        return None
    problem = schema_problem(args_schema)
    if problem is not None:  # refuse a broken schema when it is raised, not when answered
        raise ValueError(f"args_schema: {problem}")
    return dict(args_schema)


# ------------------------------------------------------------------ Agent Inbox shape


def inbox_request(
    action: str,
    args: Mapping[str, Any],
    *,
    description: str = "",
    allowed: Sequence[DecisionName] = ALL,
    args_schema: Mapping[str, Any] | None = None,
    policy: Mapping[str, Any] | None = None,
    deadline: Deadline | None = None,
) -> dict[str, Any]:
    """An Agent Inbox ``HumanInterrupt`` (plus irq's ``args_schema`` key, ``policy``: the
    rule that requires the approval, when a policy guard raises it, and ``deadline_at``: now
    + ``deadline`` (a timedelta or seconds), in UTC ISO. The node calls it when it raises
    the interrupt; when it runs again on resume LangGraph keeps the first value.)

    ``allowed`` becomes the ``allow_*`` flags: approve -> ``allow_accept``, edit ->
    ``allow_edit``, respond -> ``allow_respond``, reject -> ``allow_ignore`` and, so that the
    feedback can travel, ``allow_respond`` (the shape has no reject-with-feedback of its own).
    """
    unknown = set(allowed) - set(ALL)
    if unknown:
        raise ValueError(f"unknown decisions: {sorted(unknown)}")
    request: dict[str, Any] = {
        "action_request": {"action": action, "args": dict(args)},
        "config": {
            "allow_accept": "approve" in allowed,
            "allow_edit": "edit" in allowed,
            "allow_respond": "respond" in allowed or "reject" in allowed,
            "allow_ignore": "reject" in allowed,
        },
        "description": description,
    }
    schema = _checked_schema(args_schema)
    if schema is not None:
        request[KEY_ARGS_SCHEMA] = schema
    if policy is not None:
        request["policy"] = dict(policy)
    deadline_at = deadline_at_iso(datetime.now(UTC), deadline)
    if deadline_at is not None:  # past it irq raises interrupt_overdue; the run keeps waiting
        request["deadline_at"] = deadline_at
    return request


@dataclass(frozen=True)
class HumanReply:
    """What a human answered to one request, in irq's four words."""

    kind: DecisionName
    args: dict[str, Any]  # what to run with: the edited args for edit, else the proposed ones
    text: str | None = None  # reject feedback or the respond answer
    raw: Any = None  # the resume value as the graph received it

    @property
    def approved(self) -> bool:
        return self.kind in ("approve", "edit")

    @classmethod
    def from_inbox(cls, response: Any, *, proposed: Mapping[str, Any]) -> HumanReply:
        """An Agent Inbox ``HumanResponse`` (or the list of one it arrives in)."""
        one = response[0] if isinstance(response, list) and response else response
        kind = one.get("type") if isinstance(one, dict) else None
        args = one.get("args") if isinstance(one, dict) else None
        if kind == "accept":
            return cls("approve", dict(proposed), raw=response)
        if kind == "edit" and isinstance(args, dict) and isinstance(args.get("args"), dict):
            return cls("edit", dict(args["args"]), raw=response)
        if kind == "response":  # reject with feedback or an answer: the same wire value
            return cls("respond", dict(proposed), text=str(args), raw=response)
        return cls("reject", dict(proposed), raw=response)  # ignore, or anything unknown

    @classmethod
    def from_decision(cls, decision: Any, *, proposed: Mapping[str, Any]) -> HumanReply:
        """One ``HumanInTheLoopMiddleware`` decision."""
        data = decision if isinstance(decision, dict) else {}
        kind = data.get("type")
        if kind == "approve":
            return cls("approve", dict(proposed), raw=decision)
        edited = data.get("edited_action")
        if kind == "edit" and isinstance(edited, dict) and isinstance(edited.get("args"), dict):
            return cls("edit", dict(edited["args"]), raw=decision)
        message = data.get("message")
        text = str(message) if message is not None else None
        if kind == "respond":
            return cls("respond", dict(proposed), text=text, raw=decision)
        return cls("reject", dict(proposed), text=text, raw=decision)


def ask(
    action: str,
    args: Mapping[str, Any],
    *,
    description: str = "",
    allowed: Sequence[DecisionName] = ALL,
    args_schema: Mapping[str, Any] | None = None,
    policy: Mapping[str, Any] | None = None,
    deadline: Deadline | None = None,
) -> HumanReply:
    """``interrupt()`` with an Agent Inbox request; the human's reply. Call it inside a node
    (it stops the run; the node runs again from its start when the reply comes).
    ``deadline``: see :func:`inbox_request`."""
    from langgraph.types import interrupt

    request = inbox_request(
        action,
        args,
        description=description,
        allowed=allowed,
        args_schema=args_schema,
        policy=policy,
        deadline=deadline,
    )
    return HumanReply.from_inbox(interrupt(request), proposed=args)


# ------------------------------------------------------------------ policy guard


def guarded_tool(
    tool: str,
    args: Mapping[str, Any],
    fn: Callable[..., R],
    *,
    agent: str,
    team: str = "",
    data: Sequence[str] = (),
    sensitive: bool = False,
    args_schema: Mapping[str, Any] | None = None,
    context: str | None = None,
    node: NodeContext | None = None,
) -> R:
    """Call ``fn(**args)`` inside a (sync) node if irq's policy allows it.

    The decision is evaluated in the node, before any ``interrupt()``: prohibit ->
    ``policy_guard.ToolProhibited`` (``fn`` never runs); require_approval -> :func:`ask` with
    the rule in the request (``policy``), reject or respond (one wire value in the Agent Inbox
    shape; the text is the feedback) -> ``policy_guard.ToolRejected``, approve / edit ->
    ``fn`` runs with the final args; then the call's obligations are opened. LangGraph
    journals no decision: when the node runs again after the reply, the call is evaluated
    again under the policy of that moment (a decision reported twice has the same call id,
    ``<node>:t<n>`` with n counting the node's guarded calls in this Agent Server run, and
    the gateway keeps one). In an async node use :func:`aguarded_tool`.
    """
    call = _GuardedCall.start(tool, node, context)
    decision = call.decide(args, agent=agent, team=team, data=data, sensitive=sensitive)
    final_args = call.approve(decision, args, args_schema)
    result = fn(**final_args)
    call.opened(decision)
    return result


async def aguarded_tool(
    tool: str,
    args: Mapping[str, Any],
    fn: Callable[..., Awaitable[R]],
    *,
    agent: str,
    team: str = "",
    data: Sequence[str] = (),
    sensitive: bool = False,
    args_schema: Mapping[str, Any] | None = None,
    context: str | None = None,
    node: NodeContext | None = None,
) -> R:
    """:func:`guarded_tool` for an async node and an async ``fn``: the check (which may wait
    for the policy on the process's first call) and the reports run in a worker thread, off
    the Agent Server's event loop."""
    call = _GuardedCall.start(tool, node, context)
    decision = await asyncio.to_thread(
        call.decide, args, agent=agent, team=team, data=data, sensitive=sensitive
    )
    final_args = call.approve(decision, args, args_schema)
    result = await fn(**final_args)
    await asyncio.to_thread(call.opened, decision)
    return result


#: guarded calls per node execution (keyed by the Agent Server run), for deterministic call ids
_guarded_calls: dict[str, dict[str, int]] = {}


@dataclass(frozen=True)
class _GuardedCall:
    """One guarded call: where it runs and its call id; the steps of the guard."""

    tool: str
    call_id: str
    context: str
    native_id: str

    @classmethod
    def start(cls, tool: str, node: NodeContext | None, context: str | None) -> _GuardedCall:
        where = node or NodeContext.current()
        key = where.run_id or where.thread_id
        if key not in _guarded_calls and len(_guarded_calls) >= 1000:
            _guarded_calls.pop(next(iter(_guarded_calls)))
        calls = _guarded_calls.setdefault(key, {})
        n = calls[where.node] = calls.get(where.node, 0) + 1
        return cls(
            tool=tool,
            call_id=f"{where.node}:t{n}",
            context=context if context is not None else (os.environ.get(ENV_CONTEXT) or "local"),
            native_id=where.thread_id,
        )

    def decide(
        self,
        args: Mapping[str, Any],
        *,
        agent: str,
        team: str,
        data: Sequence[str],
        sensitive: bool,
    ) -> PolicyDecision:
        """Check and report the decision; ToolProhibited on prohibit."""
        from backend_adapters import policy_guard

        decision = policy_guard.check_call(
            self.tool,
            dict(args),
            data=list(data),
            agent=agent,
            team=team,
            sensitive=sensitive,
            backend=BACKEND,
            context=self.context,
            native_id=self.native_id,
        )
        policy_guard.report_decision(
            decision,
            tool=self.tool,
            call_id=self.call_id,
            backend=BACKEND,
            context=self.context,
            native_id=self.native_id,
        )
        if decision.outcome == "prohibit":
            raise policy_guard.ToolProhibited(decision, self.tool)
        return decision

    def approve(
        self,
        decision: PolicyDecision,
        args: Mapping[str, Any],
        args_schema: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The args to run with: asks when the decision requires an approval."""
        from backend_adapters import policy_guard

        if decision.outcome != "require_approval":
            return dict(args)
        asked = policy_guard.approval_request(self.tool, args, decision, args_schema=args_schema)
        reply = ask(
            self.tool,
            asked.args,
            description=asked.description,
            allowed=[d for d in ALL if d in asked.allowed_decisions],
            args_schema=asked.args_schema,
            policy=asked.policy,
        )
        if not reply.approved:
            raise policy_guard.ToolRejected(reply.text, self.tool, decision)
        return reply.args

    def opened(self, decision: PolicyDecision) -> None:
        from backend_adapters import policy_guard

        policy_guard.open_obligations(
            decision,
            tool=self.tool,
            call_id=self.call_id,
            backend=BACKEND,
            context=self.context,
            native_id=self.native_id,
        )


# ------------------------------------------------------------------ middleware shape


@dataclass(frozen=True)
class ToolCallReview:
    """One tool call to review, in ``HumanInTheLoopMiddleware``'s vocabulary."""

    name: str
    args: Mapping[str, Any]
    description: str = ""
    allowed: Sequence[DecisionName] = ALL
    args_schema: Mapping[str, Any] | None = None


def tool_review_request(calls: Iterable[ToolCallReview]) -> dict[str, Any]:
    """A ``HumanInTheLoopMiddleware`` request: ``action_requests`` + ``review_configs``
    (with irq's ``args_schema`` per call; the middleware itself leaves it unset)."""
    requests: list[dict[str, Any]] = []
    configs: list[dict[str, Any]] = []
    for call in calls:
        requests.append(
            {"name": call.name, "args": dict(call.args), "description": call.description}
        )
        config: dict[str, Any] = {"action_name": call.name, "allowed_decisions": list(call.allowed)}
        schema = _checked_schema(call.args_schema)
        if schema is not None:
            config[KEY_ARGS_SCHEMA] = schema
        configs.append(config)
    if not requests:
        raise ValueError("no tool calls to review")
    return {"action_requests": requests, "review_configs": configs}


def review_tools(calls: Sequence[ToolCallReview]) -> list[HumanReply]:
    """``interrupt()`` with a middleware request; one reply per call, in order. irq sends one
    decision per call, all together (never a partial list)."""
    from langgraph.types import interrupt

    answer = interrupt(tool_review_request(calls))
    decisions = answer.get("decisions") if isinstance(answer, dict) else None
    if not isinstance(decisions, list) or len(decisions) != len(calls):
        raise ValueError(f"expected {len(calls)} decisions, got {answer!r}"[:300])
    return [
        HumanReply.from_decision(d, proposed=c.args) for d, c in zip(decisions, calls, strict=True)
    ]


# ---------------------------------------------------------------------- run side


class AgentResource(AcquiredResource):
    """Something the node holds, with its pause/cancel policy and how to take and free it.
    ``acquire`` and ``release`` must be idempotent (a node runs again after a pause)."""


@dataclass(frozen=True)
class NodeContext:
    """Where the current node runs: its thread, Agent Server run, node name and server URL."""

    thread_id: str
    run_id: str = ""
    node: str = ""
    api_url: str = ""

    @classmethod
    def current(cls) -> NodeContext:
        """From LangGraph's runnable config (inside a node)."""
        from langgraph.config import get_config

        config = get_config()
        configurable = config.get("configurable") or {}
        metadata = config.get("metadata") or {}
        return cls(
            thread_id=str(configurable.get("thread_id") or ""),
            run_id=str(configurable.get("run_id") or metadata.get("run_id") or ""),
            node=str(metadata.get("langgraph_node") or ""),
            api_url=str(metadata.get("langgraph_api_url") or ""),
        )


class AgentRun:
    """The irq side of one node execution: resources, heartbeats, release on the way out.

    Use ``with AgentRun(...) as run:`` in a sync node and ``async with`` in an async node
    (its server calls are then async: the Agent Server refuses blocking I/O on its loop).
    """

    def __init__(
        self,
        *,
        name: str = "",
        resources: Sequence[AgentResource] = (),
        interval_s: float = 2.0,
        timeout_s: float | None = None,
        context: str | None = None,
        node: NodeContext | None = None,
        pusher: HeartbeatPusher | None = None,
        api_key: str | None = None,
    ) -> None:
        self.name = name
        self.resources = list(resources)
        self.interval_s = interval_s
        self.timeout_s = timeout_s if timeout_s is not None else max(3 * interval_s, 5.0)
        self.context = context if context is not None else (os.environ.get(ENV_CONTEXT) or None)
        self._node = node
        self._pusher = pusher
        self._headers = {"x-api-key": api_key} if api_key else {}
        self._seq = 0
        self._progress: float | None = None
        self._details: dict[str, Any] = {}
        # a beat never follows the final report
        self._beats = HeartbeatLoop(self._push, name="irq-langgraph-beat")
        self._stop_checked = (0.0, False)
        self.phase: Phase = "running"

    # ----------------------------------------------------------------------- plumbing

    @property
    def node(self) -> NodeContext:
        if self._node is None:
            self._node = NodeContext.current()
        return self._node

    def _next_seq(self) -> int:
        self._seq = next_seq(self._seq)
        return self._seq

    def frame(self) -> dict[str, Any]:
        return heartbeat_frame(
            backend=BACKEND,
            context=self.context,
            native_id=self.node.thread_id,
            seq=self._next_seq(),
            phase=self.phase,
            progress=self._progress,
            details={"node": self.node.node, "name": self.name, **self._details},
            resources=[r.entry() for r in self.resources],
            interval_s=self.interval_s,
            timeout_s=self.timeout_s,
            in_flight_step=self.node.node or None,
        )

    def _push(self) -> None:
        (self._pusher or shared_pusher()).push(self.frame())

    def beat(self, progress: float | None = None, **details: Any) -> None:
        """Report progress (0..1) and details now (the background beat repeats them)."""
        if progress is not None:
            self._progress = progress
        self._details.update(details)
        self._push()

    # ------------------------------------------------------------------ stop requests

    def _run_url(self) -> str | None:
        node = self.node
        if not (node.api_url and node.thread_id and node.run_id):
            return None
        return f"{node.api_url.rstrip('/')}/threads/{node.thread_id}/runs/{node.run_id}"

    def _stopped(self, status: int, body: Any) -> bool:
        if status == 404:
            return True  # the run was rolled back (deleted)
        return isinstance(body, dict) and body.get("status") in ("interrupted", "error")

    def stop_requested(self) -> bool:
        """Whether this node's run was cancelled or paused (a synchronous node keeps running
        after a cancel; call this between units of work). Cached for one second."""
        at, answer = self._stop_checked
        url = self._run_url()
        if url is None or answer or time.monotonic() - at < 1.0:
            return answer
        try:
            r = httpx.get(url, headers=self._headers, timeout=2.0)
            answer = self._stopped(r.status_code, r.json() if r.content else None)
        except (httpx.HTTPError, ValueError):
            answer = False
        self._stop_checked = (time.monotonic(), answer)
        return answer

    async def astop_requested(self) -> bool:
        """:meth:`stop_requested` for async nodes."""
        at, answer = self._stop_checked
        url = self._run_url()
        if url is None or answer or time.monotonic() - at < 1.0:
            return answer
        try:
            async with httpx.AsyncClient(headers=self._headers, timeout=2.0) as client:
                r = await client.get(url)
            answer = self._stopped(r.status_code, r.json() if r.content else None)
        except (httpx.HTTPError, ValueError):
            answer = False
        self._stop_checked = (time.monotonic(), answer)
        return answer

    def _intent_from(self, thread: Any) -> str | None:
        meta = thread.get("metadata") if isinstance(thread, dict) else None
        intent = meta.get(META_INTENT) if isinstance(meta, dict) else None
        action = intent.get("action") if isinstance(intent, dict) else None
        return action if isinstance(action, str) else None

    def _thread_url(self) -> str | None:
        node = self.node
        if not (node.api_url and node.thread_id):
            return None
        return f"{node.api_url.rstrip('/')}/threads/{node.thread_id}"

    def _intent(self) -> str | None:
        url = self._thread_url()
        if url is None:
            return None
        try:
            return self._intent_from(httpx.get(url, headers=self._headers, timeout=2.0).json())
        except (httpx.HTTPError, ValueError):
            return None

    async def _aintent(self) -> str | None:
        url = self._thread_url()
        if url is None:
            return None
        try:
            async with httpx.AsyncClient(headers=self._headers, timeout=2.0) as client:
                return self._intent_from((await client.get(url)).json())
        except (httpx.HTTPError, ValueError):
            return None

    # ------------------------------------------------------------------ enter / exit

    def _enter(self) -> None:
        for resource in self.resources:
            if resource.acquire is not None:
                resource.acquire()
            resource.state = "held"
        self._push()
        self._beats.start(self.interval_s)

    def _phase_for(self, exc: BaseException | None, stopped: bool, intent: str | None) -> Phase:
        if exc is not None and type(exc).__name__ in ("GraphInterrupt", "NodeInterrupt"):
            return "waiting"  # interrupt() inside the block: the node runs again on resume
        if stopped or isinstance(exc, asyncio.CancelledError):
            return "paused" if intent == "pause" else "cancelled"
        return "failed" if exc is not None else "completed"

    def _finish(self, phase: Phase) -> None:
        # no join: an async node must not block its loop; the beat thread ends at its next
        # wake-up and, holding the same lock, never pushes after the final report
        self._beats.stop()
        self.phase = phase
        for resource in self.resources:
            keep = (
                phase in ("waiting", "running")
                or (phase == "paused" and resource.on_pause == "keep")
                or (phase != "paused" and resource.on_cancel == "keep")
            )
            if keep or resource.state == "released":
                continue
            try:
                if resource.release is not None:
                    resource.release()
                resource.state = "released"
            except Exception:  # report it as held: the console flags what was not released
                log.exception("releasing %s failed", resource.id)
        self._push()

    def __enter__(self) -> AgentRun:
        self._enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stopped = exc is None and self._stop_checked[1]
        intent = self._intent() if (stopped or exc is not None) else None
        self._finish(self._phase_for(exc, stopped, intent))

    async def __aenter__(self) -> AgentRun:
        self._enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stopped = exc is None and self._stop_checked[1]
        intent = await self._aintent() if (stopped or exc is not None) else None
        self._finish(self._phase_for(exc, stopped, intent))
