"""Retry a LangGraph thread by forking it from a checkpoint (time travel), and the failure
facts that retry starts from.

A thread's checkpoints form a tree (every fork adds a branch); the thread's *current branch*
is the newest checkpoint and its ancestors. A retry re-runs the graph from one checkpoint on
that branch: ``POST /threads/{tid}/runs {"checkpoint_id": C, "input": null}`` (measured on
langgraph-api 0.16.7: the server writes a ``source: fork`` checkpoint copying C and runs
C's ``next`` nodes and everything after them; the nodes before C are not re-run). The
default checkpoint is the last one whose ``next`` holds the node that failed (the failed
node runs again, nothing before it); ``from_step`` names a node (the last checkpoint before
it) or a checkpoint's step number, as ``irq show`` lists the journal (``JournalStep.index``).

LangGraph journals a node's *result* (the state update), never its side effects: every node
that runs again repeats its calls, so each is listed in ``unjournaled_effects``.

The pure part (:func:`current_branch`, :func:`plan_retry`, :func:`failure_of`) serves the
Agent Server and the checkpointer mode alike; :class:`AgentServerRetry` sends the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from backend_adapters.base import Conflict, InvalidInput
from backend_adapters.langgraph.conventions import META_BY, META_INTENT, META_RETRY, Intent
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.state_mapping import (
    error_name,
    intent_of,
    metadata_of,
    parse_time,
    pending_interrupts,
)
from backend_adapters.langgraph.thread_reads import ThreadReads
from console.run_facts import RetryOutcome, RetryPlan, RunError

#: the Agent Server hides an exception's text from the thread (``thread.error.message``);
#: the failed task in the checkpoint keeps it
HIDDEN_MESSAGE = "An internal error occurred"


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a thread, as a retry plan reads it."""

    id: str
    parent: str | None
    step: int
    next: tuple[str, ...]  # the nodes that run from this checkpoint
    failed: tuple[tuple[str, str], ...]  # (node, error) of its tasks that raised
    created_at: datetime | None


def _checkpoint_id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        cid = value.get("checkpoint_id")
        return str(cid) if cid else None
    return str(value) if value else None


def checkpoint_of(snapshot: Mapping[str, Any]) -> Checkpoint:
    """A history entry (Agent Server ``/history``, or the checkpointer's state history as
    ``checkpointer.py`` shapes it) as a :class:`Checkpoint`."""
    meta = snapshot.get("metadata") if isinstance(snapshot.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    step = meta.get("step")
    tasks = snapshot.get("tasks") if isinstance(snapshot.get("tasks"), list) else []
    assert isinstance(tasks, list)
    created = snapshot.get("created_at")
    return Checkpoint(
        id=_checkpoint_id(snapshot.get("checkpoint")) or "",
        parent=_checkpoint_id(snapshot.get("parent_checkpoint")),
        step=step if isinstance(step, int) else 0,
        next=tuple(str(n) for n in snapshot.get("next") or () if not str(n).startswith("__")),
        failed=tuple(
            (str(t.get("name") or "?"), str(t["error"]))
            for t in tasks
            if isinstance(t, Mapping) and t.get("error")
        ),
        created_at=created if isinstance(created, datetime) else parse_time(created),
    )


def current_branch(history: Iterable[Mapping[str, Any]]) -> list[Checkpoint]:
    """The newest checkpoint and its ancestors, oldest first (forks leave older branches in
    the history; only this one is what the thread is now)."""
    points = [checkpoint_of(h) for h in history]
    if not points:
        return []
    by_id = {p.id: p for p in points}
    epoch = datetime.min.replace(tzinfo=UTC)
    newest = max(points, key=lambda p: (p.created_at or epoch, p.step))
    branch = [newest]
    while branch[-1].parent and branch[-1].parent in by_id and len(branch) <= len(points):
        branch.append(by_id[branch[-1].parent])
    return branch[::-1]


def failure_of(
    branch: list[Checkpoint], thread_error: Any = None, at: datetime | None = None
) -> RunError | None:
    """The failed node of the branch's newest checkpoint as a :class:`RunError` (None when
    no task of it raised). ``thread_error``: the thread's ``error`` (its type)."""
    if not branch or not branch[-1].failed:
        return None
    node, text = branch[-1].failed[0]
    kind = error_name({"error": thread_error}) or text.split("(", 1)[0]
    message = ""
    if isinstance(thread_error, Mapping):
        message = str(thread_error.get("message") or "")
    if not message or message == HIDDEN_MESSAGE:
        message = text
    return RunError(type=kind, message=message[:1000], step=node, at=at or branch[-1].created_at)


def _start_index(branch: list[Checkpoint], from_step: str | None) -> int:
    if from_step is None:
        failed = {node for node, _ in branch[-1].failed} if branch else set()
        for i in range(len(branch) - 1, -1, -1):
            if failed and failed & set(branch[i].next):
                return i
        if branch and branch[-1].next:
            return len(branch) - 1  # stopped, not failed: run what was next again
        raise InvalidInput(
            "nothing to re-run from the thread's last checkpoint (it ran to its end): name a "
            "step with --from (a node or a journal step number)"
        )
    wanted = from_step.strip()
    if wanted.lstrip("-").isdigit():
        for i in range(len(branch) - 1, -1, -1):
            if branch[i].step == int(wanted):
                return i
        steps = ", ".join(str(c.step) for c in branch)
        raise InvalidInput(f"no checkpoint at step {wanted} on this thread (steps: {steps})")
    for i in range(len(branch) - 1, -1, -1):
        if wanted in branch[i].next:
            return i
    nodes = ", ".join(dict.fromkeys(n for c in branch for n in c.next)) or "none"
    raise InvalidInput(f"no checkpoint before node {wanted!r} on this thread (nodes: {nodes})")


def plan_retry(
    branch: list[Checkpoint], from_step: str | None, *, operations: list[str]
) -> tuple[RetryPlan, Checkpoint]:
    """What a fork from the chosen checkpoint keeps and re-runs, and that checkpoint."""
    start = _start_index(branch, from_step)
    chosen = branch[start]
    kept = list(dict.fromkeys(n for c in branch[:start] for n in c.next))
    rerun = list(dict.fromkeys(n for c in branch[start:] for n in c.next))
    plan = RetryPlan(
        from_step=chosen.next[0] if chosen.next else None,
        steps_kept=kept,
        will_rerun=rerun,
        unjournaled_effects=list(rerun),
        operations=operations,
        warnings=[
            f"{node}: LangGraph keeps a node's result, not its side effects; its calls "
            "(APIs, emails, payments, files) happen again"
            for node in rerun
        ]
        + [
            f"forks from checkpoint {chosen.id} (step {chosen.step}); the graph then runs "
            "whatever follows those nodes, as on a first run"
        ],
        new_run=False,
        any_step=True,
    )
    return plan, chosen


def refuse_while_active(tid: str, thread: Mapping[str, Any]) -> None:
    """Conflict for a thread that runs or waits for a decision: retry is for stopped ones."""
    status = thread.get("status")
    if status == "busy":
        raise Conflict(
            f"thread {tid} is running: wait for it to finish or fail, or cancel it "
            "(irq cancel) and then retry",
            target=tid,
        )
    if status == "interrupted" and pending_interrupts(thread):
        raise Conflict(
            f"thread {tid} is waiting for a decision: decide it (irq decide) or cancel it "
            "first; retry re-runs failed or stopped threads",
            target=tid,
        )


class AgentServerRetry:
    """Retry on an Agent Server: plan from the thread's history, fork by ``checkpoint_id``."""

    def __init__(self, http: AgentServerHttp, threads: ThreadReads) -> None:
        self._http = http
        self._threads = threads

    async def _branch(self, tid: str) -> tuple[dict[str, Any], list[Checkpoint]]:
        thread = await self._threads.thread(tid)
        history = await self._http.history(tid, limit=500)
        return thread, current_branch(history)

    @staticmethod
    def _operations(tid: str, checkpoint: str) -> list[str]:
        return [
            f"PATCH /threads/{tid} (irq_intent=retry)",
            f'POST /threads/{tid}/runs {{"checkpoint_id": "{checkpoint}", "input": null, '
            '"multitask_strategy": "reject"}',
        ]

    async def plan(self, tid: str, from_step: str | None) -> RetryPlan:
        thread, branch = await self._branch(tid)
        refuse_while_active(tid, thread)
        plan, chosen = plan_retry(branch, from_step, operations=[])
        plan.operations = self._operations(tid, chosen.id)
        return plan

    async def _earlier(self, tid: str, request_id: str) -> dict[str, Any] | None:
        for run in await self._http.runs(tid, limit=100):
            meta = run.get("metadata")
            if isinstance(meta, dict) and meta.get(META_RETRY) == request_id:
                return run
        return None

    async def retry(
        self, tid: str, from_step: str | None, *, request_id: str, reason: str, identity: str
    ) -> RetryOutcome:
        # a repeated command finds its own run by the key irq put in the run's metadata
        earlier = await self._earlier(tid, request_id)
        if earlier is not None:
            return RetryOutcome(
                detail=(
                    f"already retried: run {earlier.get('run_id')} with this command "
                    f"({earlier.get('status')}); nothing sent"
                )
            )
        thread, branch = await self._branch(tid)
        refuse_while_active(tid, thread)
        plan, chosen = plan_retry(branch, from_step, operations=[])
        intent: Intent = {
            "action": "retry",
            "by": identity,
            "reason": reason,
            "at": datetime.now(UTC).isoformat(),
        }
        await self._http.patch_metadata(tid, {META_INTENT: dict(intent)})
        meta = metadata_of(thread)
        body = {
            "assistant_id": meta.get("graph_id") or meta.get("assistant_id"),
            "input": None,
            "checkpoint_id": chosen.id,
            # a second retry racing this one is refused (409) rather than queued behind it
            "multitask_strategy": "reject",
            "metadata": {META_RETRY: request_id, META_BY: identity},
        }
        created = await self._http.create_run(tid, body)
        was = "cancelled by irq" if intent_of(thread).get("action") == "cancel" else (
            str(thread.get("status") or "")
        )
        return RetryOutcome(
            detail=(
                f"run {created.get('run_id')} re-runs {', '.join(plan.will_rerun) or 'the graph'}"
                f" from checkpoint {chosen.id} (step {chosen.step}; the thread was {was}); "
                f"kept: {', '.join(plan.steps_kept) or 'nothing'}"
            ),
            operations=self._operations(tid, chosen.id),
        )
