"""Deciding a static breakpoint (``breakpoints.py``), at most once per stop.

- **approve** continues the thread: ``POST /threads/{id}/runs {"input": null}`` with
  ``multitask_strategy=reject`` and irq's run metadata (command id, ``bp-<checkpoint>``,
  decision, who).
- **edit** writes the top-level state keys the operator changed (``POST /threads/{id}/state``
  without ``as_node``: LangGraph attributes it to the node that last ran, so ``next`` stays
  the same) and then continues like approve. Unchanged values: just approve.
- **reject** ends the thread without running its next node (``POST /threads/{id}/state
  {"values": null, "as_node": "__end__"}``, Agent Inbox's "mark as resolved"); the thread
  becomes ``idle``. The graph never reads the feedback: it is kept in the thread's metadata
  (``irq_breakpoint``) and in irq's audit.

Exactly once: a breakpoint is one checkpoint. Before acting, the thread's runs are searched
for irq's metadata naming this stop (approve and the continue of an edit), and the thread's
``irq_breakpoint`` record, written *before* an edit or a reject touches the state, names the
command that is applying it. A re-driven decision finds its own run or record and reports it
delivered, finishing an edit whose state update landed but whose continue did not; anything
else that moved the thread off that checkpoint is a conflict, and nothing is sent.
"""

from __future__ import annotations

from typing import Any

from backend_adapters.base import ActionOutcome, Conflict, InvalidInput
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.langgraph.breakpoints import BREAKPOINT_PREFIX, checkpoint_of
from backend_adapters.langgraph.conventions import (
    META_BREAKPOINT,
    META_BY,
    META_COMMAND,
    META_DECISION,
    META_INTERRUPT,
)
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.state_mapping import may_be_at_breakpoint, metadata_of
from backend_adapters.langgraph.thread_reads import ThreadReads, earlier_delivery
from console.model import Decision, DecisionKind, Interrupt


class BreakpointDelivery:
    """Approve, edit or reject a thread stopped at a static breakpoint."""

    def __init__(self, http: AgentServerHttp, threads: ThreadReads, *, follow_s: float) -> None:
        self._http = http
        self._threads = threads
        self._follow_s = follow_s

    async def decide(
        self,
        tid: str,
        interrupt: Interrupt,
        decision: Decision,
        *,
        idempotency_key: str,
        identity: str,
    ) -> ActionOutcome:
        refuse_decision(interrupt, decision, target=interrupt.id)
        if decision.kind is DecisionKind.EDIT and not isinstance(decision.args, dict):
            raise InvalidInput("decision refused: edit needs the state values", target=interrupt.id)
        checkpoint = interrupt.native_id.removeprefix(BREAKPOINT_PREFIX)
        thread = await self._threads.thread(tid)
        delivered = await earlier_delivery(
            self._http, tid, interrupt, idempotency_key, did="continued", what="breakpoint")
        if delivered is not None:
            return delivered
        record = metadata_of(thread).get(META_BREAKPOINT)
        record = record if isinstance(record, dict) else {}
        ours = record.get("checkpoint") == checkpoint and record.get("command") == idempotency_key
        if record.get("checkpoint") == checkpoint and not ours:
            raise Conflict(
                f"breakpoint {interrupt.native_id} was already decided "
                f"({record.get('decision')} by {record.get('by') or '?'})",
                target=interrupt.id,
            )
        state = await self._http.state(tid)
        now = checkpoint_of(state)
        if now != checkpoint or not may_be_at_breakpoint(thread) or not state.get("next"):
            if ours:
                return await self._finish(tid, interrupt, decision, record, state, identity)
            raise Conflict(
                f"thread {tid} is no longer stopped at breakpoint {interrupt.native_id} "
                f"(thread {thread.get('status')}, checkpoint {now or '?'}): it was continued "
                "or changed outside irq; nothing sent",
                target=interrupt.id,
            )
        return await self._apply(tid, interrupt, decision, state, idempotency_key, identity)

    async def _apply(
        self,
        tid: str,
        interrupt: Interrupt,
        decision: Decision,
        state: dict[str, Any],
        key: str,
        identity: str,
    ) -> ActionOutcome:
        checkpoint = interrupt.native_id.removeprefix(BREAKPOINT_PREFIX)
        if decision.kind is DecisionKind.APPROVE:
            return await self._continue(tid, interrupt, decision, key, identity, [])
        record = {
            "checkpoint": checkpoint,
            "command": key,
            "decision": decision.kind.value,
            "by": identity,
            "feedback": decision.feedback or "",
        }
        if decision.kind is DecisionKind.REJECT:
            await self._http.patch_metadata(tid, {META_BREAKPOINT: record})
            return await self._end(tid, decision)
        values = state.get("values") if isinstance(state.get("values"), dict) else {}
        assert isinstance(values, dict) and isinstance(decision.args, dict)
        changed = {k: v for k, v in decision.args.items() if values.get(k) != v}
        if not changed:  # an edit that changes nothing continues, as approve would
            return await self._continue(tid, interrupt, decision, key, identity, [])
        await self._http.patch_metadata(tid, {META_BREAKPOINT: record})
        await self._http.update_state(tid, {"values": changed})
        ops = [
            f"PATCH /threads/{tid} (irq_breakpoint: edit)",
            f"POST /threads/{tid}/state (values: {', '.join(sorted(changed))})",
        ]
        return await self._continue(tid, interrupt, decision, key, identity, ops)

    async def _finish(
        self,
        tid: str,
        interrupt: Interrupt,
        decision: Decision,
        record: dict[str, Any],
        state: dict[str, Any],
        identity: str,
    ) -> ActionOutcome:
        """A re-driven edit or reject of ours whose state update already landed: a reject is
        done; an edit whose continue never started continues now (its state update is the
        thread's latest checkpoint, on top of the breakpoint's)."""
        checkpoint = interrupt.native_id.removeprefix(BREAKPOINT_PREFIX)
        parent = state.get("parent_checkpoint")
        parent_id = parent.get("checkpoint_id") if isinstance(parent, dict) else None
        meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        our_update = parent_id == checkpoint and meta.get("source") == "update"
        if record.get("decision") == DecisionKind.EDIT.value and our_update and state.get("next"):
            return await self._continue(
                tid, interrupt, decision, str(record.get("command")), identity,
                [f"(state already updated by this command at {checkpoint_of(state)})"],
            )
        return ActionOutcome(
            detail=(
                f"already delivered: {record.get('decision')} of breakpoint "
                f"{interrupt.native_id} was applied by this command"
            )
        )

    async def _end(self, tid: str, decision: Decision) -> ActionOutcome:
        await self._http.update_state(tid, {"values": None, "as_node": "__end__"})
        return ActionOutcome(
            detail=(
                "rejected: the thread ends without running its next node (state updated as "
                "__end__; thread idle). The feedback is kept in the thread's metadata "
                "(irq_breakpoint); the graph does not read it"
            ),
            operations=[
                f"PATCH /threads/{tid} (irq_breakpoint: reject)",
                f'POST /threads/{tid}/state {{"values": null, "as_node": "__end__"}}',
            ],
        )

    async def _continue(
        self,
        tid: str,
        interrupt: Interrupt,
        decision: Decision,
        key: str,
        identity: str,
        ops: list[str],
    ) -> ActionOutcome:
        thread = await self._threads.thread(tid)
        meta = metadata_of(thread)
        body = {
            "assistant_id": meta.get("graph_id") or meta.get("assistant_id"),
            "input": None,
            "multitask_strategy": "reject",
            "metadata": {
                META_COMMAND: key,
                META_INTERRUPT: interrupt.native_id,
                META_DECISION: decision.kind.value,
                META_BY: identity,
            },
        }
        try:
            created = await self._http.create_run(tid, body)
        except Conflict as exc:
            raise Conflict(
                f"thread {tid} is already running a task: nothing sent ({exc.message})",
                target=interrupt.id,
            ) from exc
        rid = str(created.get("run_id") or "")
        ended = await self._threads.follow(tid, rid, self._follow_s) if rid else False
        return ActionOutcome(
            detail=(
                f"{decision.kind.value}: run {rid} continues the thread from breakpoint "
                f"{interrupt.native_id} ({interrupt.wait_site or 'its next node'})"
                + ("; the run stopped or finished" if ended else "")
            ),
            operations=[*ops, f'POST /threads/{tid}/runs {{"input": null}}'],
        )
