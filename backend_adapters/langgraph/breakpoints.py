"""Static breakpoints (``interrupt_before=`` / ``interrupt_after=``, at compile time or on the
run) as inbox items of kind ``breakpoint``.

A thread stopped at one is ``interrupted`` with **no** interrupt value, no error and its
``next`` nodes set (measured on langgraph-api 0.16.7: the run ends ``success``). A cancel with
``action=interrupt`` (irq's pause) also leaves the thread ``interrupted`` without interrupts,
but with ``error: UserInterrupt`` and its run ``interrupted``: that is how the two differ.

Where it stopped: the server does not say whether a compile-time breakpoint was *before* the
next node or *after* the last one, but its drawing of the graph does
(``GET /assistants/{id}/graph``: a node's ``metadata.__interrupt`` is ``before``, ``after`` or
``before,after``); breakpoints given on the run are in the run's ``kwargs``.

The item's native id is ``bp-<checkpoint id>``: a breakpoint is one stop at one checkpoint,
so a decision for an older stop never continues a newer one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from backend_adapters.base import BackendError
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.state_mapping import metadata_of, parse_time
from console.model import DecisionKind, Interrupt, InterruptKind

BREAKPOINT_PREFIX = "bp-"

BREAKPOINT_DECISIONS = [DecisionKind.APPROVE, DecisionKind.EDIT, DecisionKind.REJECT]

WHAT_DECISIONS_DO = (
    "approve continues the thread (a run with input null). edit: the arguments are the "
    "thread's state values; the top-level keys you change are written to the state (POST "
    "/threads/{id}/state, as the node that last ran), then the thread continues. reject ends "
    "the thread without running the next node (state updated as __end__: the thread becomes "
    "idle); the feedback is kept in the thread's metadata (irq_breakpoint) and in irq's audit, "
    "the graph itself never reads it."
)


def checkpoint_of(state: Mapping[str, Any]) -> str:
    checkpoint = state.get("checkpoint")
    if isinstance(checkpoint, Mapping):
        return str(checkpoint.get("checkpoint_id") or "")
    return ""


def _marks(graph: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(nodes with a breakpoint before, nodes with one after) in the server's drawing."""
    before: set[str] = set()
    after: set[str] = set()
    for node in graph.get("nodes") or []:
        if not isinstance(node, Mapping):
            continue
        meta = node.get("metadata")
        mark = str(meta.get("__interrupt") or "") if isinstance(meta, Mapping) else ""
        if "before" in mark:
            before.add(str(node.get("id")))
        if "after" in mark:
            after.add(str(node.get("id")))
    return before, after


def _run_list(kwargs: Mapping[str, Any], key: str) -> list[str]:
    value = kwargs.get(key)
    if value == "*":
        return ["*"]
    return [str(v) for v in value] if isinstance(value, list) else []


def breakpoint_site(
    next_nodes: Iterable[str], graph: Mapping[str, Any], run: Mapping[str, Any] | None
) -> str:
    """``before tools`` / ``after agent``: where the thread stopped, from the graph's
    compile-time breakpoints and the last run's own ``interrupt_before`` / ``_after``."""
    nodes = list(next_nodes)
    before, after = _marks(graph)
    kwargs = run.get("kwargs") if isinstance(run, Mapping) else None
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    before.update(_run_list(kwargs, "interrupt_before"))
    after.update(_run_list(kwargs, "interrupt_after"))
    hit = [n for n in nodes if n in before or "*" in before]
    if hit:
        return "before " + ", ".join(hit)
    feeding = {
        str(e.get("source"))
        for e in graph.get("edges") or []
        if isinstance(e, Mapping) and e.get("target") in nodes
    }
    ran = sorted(n for n in after if n in feeding) or sorted(after - {"*"})
    if ran:
        return "after " + ", ".join(ran)
    return "before " + ", ".join(nodes) + " (a breakpoint the server does not name)"


def _pending_tool_calls(values: Mapping[str, Any]) -> list[str]:
    """The tool calls of the last AI message (a ``MessagesState`` graph stopped before its
    tools), for the description."""
    messages = values.get("messages")
    if not isinstance(messages, list) or not messages:
        return []
    last = messages[-1]
    calls = last.get("tool_calls") if isinstance(last, Mapping) else None
    out = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping):
            args = json.dumps(call.get("args"), default=str, ensure_ascii=False)
            out.append(f"{call.get('name')}({args[:300]})")
    return out


def breakpoint_interrupt(
    thread: Mapping[str, Any], state: Mapping[str, Any], *, run_id: str, site: str
) -> Interrupt | None:
    """The inbox item of a thread stopped at a static breakpoint; None when its state has no
    ``next`` node (nothing would continue)."""
    next_nodes = [str(n) for n in state.get("next") or []]
    checkpoint = checkpoint_of(state)
    if not next_nodes or not checkpoint:
        return None
    raw = state.get("values")
    values: dict[str, Any] = raw if isinstance(raw, dict) else {}
    calls = _pending_tool_calls(values)
    description = f"The graph stopped at a static breakpoint ({site}) at checkpoint {checkpoint}."
    if calls:
        description += "\n\nPending tool calls:\n" + "\n".join(f"- {c}" for c in calls)
    description += "\n\n" + WHAT_DECISIONS_DO
    native = BREAKPOINT_PREFIX + checkpoint
    created = (
        parse_time(state.get("created_at"))
        or parse_time(thread.get("state_updated_at"))
        or parse_time(thread.get("updated_at"))
        or datetime.now(UTC)
    )
    return Interrupt(
        id=Interrupt.make_id(run_id, native),
        run_id=run_id,
        native_id=native,
        kind=InterruptKind.BREAKPOINT,
        wait_site=site,
        title=f"Stopped {site}: continue?",
        description=description,
        action=", ".join(next_nodes),
        args=values,
        args_schema=None,
        allowed_decisions=list(BREAKPOINT_DECISIONS),
        created_at=created,
    )


class BreakpointReads:
    """Reads what a breakpoint item needs: the thread's state (``next``, checkpoint, values),
    its last run (breakpoints given on the run) and the assistant's graph drawing (compile-time
    breakpoints; one read per assistant, the graph changes only with a server restart)."""

    def __init__(self, http: AgentServerHttp) -> None:
        self._http = http
        self._graphs: dict[str, dict[str, Any]] = {}

    async def _graph(self, assistant_id: str) -> dict[str, Any]:
        if not assistant_id:
            return {}
        cached = self._graphs.get(assistant_id)
        if cached is None:
            try:
                cached = await self._http.assistant_graph(assistant_id)
            except BackendError:
                cached = {}  # no drawing (a deleted assistant): the site is named less exactly
            self._graphs[assistant_id] = cached
        return cached

    async def interrupt(self, thread: Mapping[str, Any], *, run_id: str) -> Interrupt | None:
        """The breakpoint item of a thread that :func:`may_be_at_breakpoint`, or None."""
        tid = str(thread["thread_id"])
        state = await self._http.state(tid)
        if not state.get("next"):
            return None
        runs = await self._http.runs(tid, limit=1)
        meta = metadata_of(thread)
        graph = await self._graph(str(meta.get("assistant_id") or ""))
        site = breakpoint_site([str(n) for n in state["next"]], graph, runs[0] if runs else None)
        return breakpoint_interrupt(thread, state, run_id=run_id, site=site)
