"""Plain LangGraph: a node asks with interrupt() in the Agent Inbox ``HumanInterrupt`` shape.

No irq imports. The input picks the ``config.allow_*`` flags; the node records exactly what
the resume value was (``response``), and ``act`` records what it would do with it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    allow: dict[str, bool]
    draft: dict[str, Any]
    response: Any
    outcome: str
    log: Annotated[list[str], operator.add]


def draft(state: State) -> State:
    return {"draft": {"to": "alice@example.com", "body": "hi"}, "log": ["draft"]}


def review(state: State) -> State:
    allow = state.get("allow") or {}
    request = {
        "action_request": {"action": "send_email", "args": state["draft"]},
        "config": {
            "allow_accept": allow.get("accept", True),
            "allow_edit": allow.get("edit", True),
            "allow_respond": allow.get("respond", True),
            "allow_ignore": allow.get("ignore", True),
        },
        "description": "Send this email?\n\nIt goes to a customer.",
    }
    response = interrupt(request)[0]  # the Agent Inbox resumes with a list of one
    return {"response": response, "log": ["review"]}


def act(state: State) -> State:
    response = state["response"]
    kind = response["type"]
    if kind == "accept":
        outcome = f"sent {state['draft']}"
    elif kind == "edit":
        outcome = f"sent {response['args']['args']}"
    elif kind == "response":
        outcome = f"feedback {response['args']}"
    else:
        outcome = "ignored"
    return {"outcome": outcome, "log": ["act"]}


builder = StateGraph(State)
builder.add_node("draft", draft)
builder.add_node("review", review)
builder.add_node("act", act)
builder.add_edge(START, "draft")
builder.add_edge("draft", "review")
builder.add_edge("review", "act")
builder.add_edge("act", END)
graph = builder.compile()
