"""A LangGraph graph whose tool calls go through irq's policy guard
(``backend_adapters.langgraph.agent.guarded_tool``), one call per node so a node that runs
again after the approval re-runs only its own call; ``read`` is an async node
(``aguarded_tool``). Every tool execution appends one JSON
line to the file named by ``IRQ_TEST_TOOL_LOG`` (the side effect the test counts).
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypedDict

from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph

from backend_adapters.langgraph.agent import aguarded_tool, guarded_tool
from backend_adapters.policy_guard import ToolProhibited, ToolRejected


class State(TypedDict, total=False):
    outcomes: Annotated[list[dict[str, Any]], operator.add]


def _record(thread: str, name: str, args: dict[str, Any]) -> None:
    with open(os.environ["IRQ_TEST_TOOL_LOG"], "a") as fh:
        fh.write(json.dumps({"thread": thread, "tool": name, "args": args}) + "\n")


def _thread() -> str:
    return str((get_config().get("configurable") or {}).get("thread_id") or "")


def _tool(name: str) -> Callable[..., dict[str, Any]]:
    def run(**args: Any) -> dict[str, Any]:
        _record(_thread(), name, args)
        return {"tool": name, "args": args}

    return run


def _async_tool(name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def run(**args: Any) -> dict[str, Any]:
        # off the server's event loop: langgraph dev refuses blocking I/O on it
        await asyncio.to_thread(_record, _thread(), name, args)
        return {"tool": name, "args": args}

    return run


def _call(tool: str, args: dict[str, Any], data: tuple[str, ...] = ()) -> State:
    try:
        result = guarded_tool(tool, args, _tool(tool), agent="billing-agent", team="finance",
                              data=data)
        return {"outcomes": [{"tool": tool, "outcome": "ran", "result": result}]}
    except ToolProhibited as err:
        return {"outcomes": [{"tool": tool, "outcome": "prohibited",
                              "winner": err.decision.winner}]}
    except ToolRejected as err:
        return {"outcomes": [{"tool": tool, "outcome": "rejected", "feedback": err.feedback}]}


def delete(state: State) -> State:
    return _call("delete_backup", {"id": "b-1"})


def refund(state: State) -> State:
    return _call("refund", {"amount": 250})


async def read(state: State) -> State:
    """An async node: the guard's check and reports run off the event loop."""
    try:
        result = await aguarded_tool(
            "read_records", {"patient": "p-7"}, _async_tool("read_records"),
            agent="billing-agent", team="finance", data=("patients",),
        )
    except ToolProhibited as err:
        return {"outcomes": [{"tool": "read_records", "outcome": "prohibited",
                              "winner": err.decision.winner}]}
    return {"outcomes": [{"tool": "read_records", "outcome": "ran", "result": result}]}


builder = StateGraph(State)
builder.add_node("delete", delete)
builder.add_node("refund", refund)
builder.add_node("read", read)
builder.add_edge(START, "delete")
builder.add_edge("delete", "refund")
builder.add_edge("refund", "read")
builder.add_edge("read", END)
graph = builder.compile()
