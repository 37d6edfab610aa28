"""Deciding on LangGraph: a decision resumes the thread by interrupt id (``command.resume``),
at most once; a static breakpoint's is handled by ``breakpoint_delivery.py``.

The run carries irq's metadata (command id, interrupt, decision, who), so a decision re-driven
after a crash is recognised as already delivered and one decided elsewhere as a conflict.
The decision is checked by the one rule (``backend_adapters/decision_refusal.py``) against
the interrupt the gateway knows, then again against the interrupt as the thread holds it now.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from backend_adapters.base import (
    ActionOutcome,
    Conflict,
    InvalidInput,
    NotFound,
)
from backend_adapters.langgraph.breakpoint_delivery import BreakpointDelivery
from backend_adapters.langgraph.breakpoints import BREAKPOINT_PREFIX
from backend_adapters.langgraph.conventions import (
    BACKEND,
    META_BY,
    META_COMMAND,
    META_DECISION,
    META_INTERRUPT,
)
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.interrupt_shapes import (
    ShapeError,
    interrupt_from_value,
    refuse_langgraph_decision,
    resume_value,
)
from backend_adapters.langgraph.state_mapping import intent_of, metadata_of, pending_interrupts
from backend_adapters.langgraph.thread_reads import ThreadReads, earlier_delivery
from console.model import Decision, Interrupt, InterruptKind, Run, decision_text


class LangGraphDecisionDelivery:
    """Sends decisions to one Agent Server's threads and reports what the graph did."""

    def __init__(
        self,
        http: AgentServerHttp,
        threads: ThreadReads,
        breakpoints: BreakpointDelivery,
        *,
        context: str,
        verify_s: float,
        follow_s: float,
    ) -> None:
        self._http = http
        self._threads = threads
        self._breakpoints = breakpoints
        self._context = context
        self._verify_s = verify_s
        self._follow_s = follow_s

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        tid = self._thread_of(interrupt)
        if interrupt.kind is InterruptKind.BREAKPOINT or interrupt.native_id.startswith(
            BREAKPOINT_PREFIX
        ):
            return await self._breakpoints.decide(
                tid, interrupt, decision, idempotency_key=idempotency_key, identity=identity
            )
        refuse_langgraph_decision(interrupt, decision, target=interrupt.id)
        thread = await self._threads.thread(tid)
        pending = {item["id"]: item for _task, item in pending_interrupts(thread)}
        if interrupt.native_id not in pending and thread.get("status") == "busy":
            # another interrupt's resume is running; the rest come back pending after it
            thread = await self._threads.settled(tid)
            pending = {item["id"]: item for _task, item in pending_interrupts(thread)}
        item = pending.get(interrupt.native_id)
        if item is None:
            return await self._not_pending(tid, thread, interrupt, idempotency_key, pending)
        if intent_of(thread).get("action") == "cancel":
            raise Conflict(f"thread {tid} was cancelled: its interrupt is no longer pending")
        # check again against the interrupt as the thread holds it now, in its own shape
        fresh = interrupt_from_value(
            item.get("value"),
            run_id=interrupt.run_id,
            native_id=interrupt.native_id,
            created_at=interrupt.created_at,
        )
        refuse_langgraph_decision(fresh, decision, target=interrupt.id)
        try:
            value = resume_value(item.get("value"), decision)
        except ShapeError as exc:
            raise InvalidInput(f"decision refused: {exc}", target=interrupt.id) from exc
        meta = metadata_of(thread)
        body = {
            "assistant_id": meta.get("graph_id") or meta.get("assistant_id"),
            "command": {"resume": {interrupt.native_id: value}},
            "multitask_strategy": "reject",
            "metadata": {
                META_COMMAND: idempotency_key,
                META_INTERRUPT: interrupt.native_id,
                META_DECISION: decision.kind.value,
                META_BY: identity,
            },
        }
        try:
            created = await self._http.create_run(tid, body)
        except Conflict as exc:
            raise Conflict(
                f"thread {tid} is already running a task (another decision or run is in "
                f"progress): nothing sent ({exc.message})",
                target=interrupt.id,
            ) from exc
        rid = str(created.get("run_id") or "")
        ended = await self._threads.follow(tid, rid, self._follow_s) if rid else False
        after = await self._consumed(tid, interrupt.native_id)
        detail = (
            f"resumed interrupt {interrupt.native_id} with {decision_text(decision)} "
            f"(run {rid}, multitask_strategy=reject)" + _after_resume(after, ended)
        )
        return ActionOutcome(
            detail=detail,
            operations=[
                f"GET /threads/{tid}",
                f"POST /threads/{tid}/runs (command.resume by interrupt id)",
            ],
        )

    async def _consumed(self, tid: str, interrupt_id: str) -> dict[str, Any]:
        """Re-read the thread until the interrupt is no longer pending (a resume by an
        unknown id is accepted silently), within ``verify_s``; the thread as last read."""
        deadline = time.monotonic() + self._verify_s
        while True:
            thread = await self._http.thread(tid)
            ids = {item["id"] for _task, item in pending_interrupts(thread)}
            if interrupt_id not in ids or time.monotonic() > deadline:
                return thread
            await asyncio.sleep(0.1)

    async def _not_pending(
        self,
        tid: str,
        thread: dict[str, Any],
        interrupt: Interrupt,
        key: str,
        pending: dict[str, Any],
    ) -> ActionOutcome:
        """The interrupt is not pending: our own earlier delivery (re-driven after a crash),
        decided by someone else, or an id the thread never had."""
        earlier = await earlier_delivery(
            self._http, tid, interrupt, key, did="resumed", what="interrupt")
        if earlier is not None:
            return earlier
        if intent_of(thread).get("action") == "cancel":
            raise Conflict(f"thread {tid} was cancelled: interrupt {interrupt.native_id} is gone")
        if await self._was_raised(tid, interrupt.native_id):
            raise Conflict(
                f"interrupt {interrupt.native_id} is no longer pending (thread "
                f"{thread.get('status')}): it was answered outside irq or withdrawn",
                target=interrupt.id,
            )
        now = ", ".join(sorted(pending)) or "none"
        raise NotFound(
            f"stale interrupt id {interrupt.native_id}: thread {tid} never raised it "
            f"(pending now: {now}); refresh the inbox",
            target=interrupt.id,
        )

    async def _was_raised(self, tid: str, interrupt_id: str) -> bool:
        for snap in await self._http.history(tid, limit=200):
            for task in snap.get("tasks") or []:
                for raised in task.get("interrupts") or [] if isinstance(task, dict) else []:
                    if isinstance(raised, dict) and raised.get("id") == interrupt_id:
                        return True
        return False

    def _thread_of(self, interrupt: Interrupt) -> str:
        prefix = Run.make_id(BACKEND, self._context, "")
        if interrupt.run_id.startswith(prefix):
            return interrupt.run_id[len(prefix) :]
        raise NotFound(f"interrupt {interrupt.id} does not belong to langgraph:{self._context}")


def _after_resume(thread: dict[str, Any], ended: bool) -> str:
    """What the graph did with the decision, as far as the follow saw it."""
    status = thread.get("status")
    if status == "error":
        error = thread.get("error")
        return (
            f"; the node then failed on it ({str(error)[:200]}): a poisoned resume, see the "
            "run's warnings for the recovery"
        )
    if status == "interrupted" and pending_interrupts(thread):
        return "; the graph stopped again at a new interrupt"
    if status == "idle":
        return "; the run completed"
    return "" if ended else "; the graph is still running"
