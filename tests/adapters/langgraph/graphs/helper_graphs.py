"""Graphs that use irq's LangGraph agent helpers (backend_adapters.langgraph.agent)."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from backend_adapters.langgraph.agent import (
    AgentResource,
    AgentRun,
    ToolCallReview,
    ask,
    review_tools,
)

EMAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string", "format": "email"}, "body": {"type": "string"}},
    "required": ["to", "body"],
}


class State(TypedDict, total=False):
    reply: dict[str, Any]
    replies: list[dict[str, Any]]
    steps: int
    done: int


def _plain(reply: Any) -> dict[str, Any]:
    return {"kind": reply.kind, "args": reply.args, "text": reply.text}


def ask_node(state: State) -> State:
    reply = ask(
        "send_email",
        {"to": "alice@example.com", "body": "hi"},
        description="Send this email?",
        allowed=("approve", "edit", "reject"),
        args_schema=EMAIL_SCHEMA,
    )
    return {"reply": _plain(reply)}


def review_node(state: State) -> State:
    replies = review_tools(
        [
            ToolCallReview("send_email", {"to": "a@x", "body": "hi"}, allowed=("approve", "reject")),
            ToolCallReview("delete_file", {"path": "r.txt"}, allowed=("approve", "reject")),
        ]
    )
    return {"replies": [_plain(r) for r in replies]}


def work_node(state: State) -> State:
    gpu = AgentResource("gpu-0", kind="gpu", on_pause="keep")
    lock = AgentResource("lock/ledger", kind="lock", on_pause="release")
    done = 0
    with AgentRun(name="work", resources=[gpu, lock], interval_s=0.5, timeout_s=5) as run:
        for step in range(state.get("steps", 100)):
            if run.stop_requested():  # a sync node is not stopped by a cancel: it asks
                break
            time.sleep(0.2)
            done += 1
            run.beat(progress=(step + 1) / state.get("steps", 100))
    return {"done": done}


def _single(name: str, fn: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node(name, fn)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile()


helper_ask = _single("ask", ask_node)
helper_review = _single("review", review_node)
helper_work = _single("work", work_node)
