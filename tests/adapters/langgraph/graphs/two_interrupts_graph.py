"""Plain LangGraph: two parallel nodes each stop at interrupt() (two interrupts, one thread)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    answers: Annotated[list[dict[str, Any]], operator.add]


def _ask(action: str) -> Any:
    def node(state: State) -> State:
        request = {
            "action_request": {"action": action, "args": {"target": action}},
            "config": {
                "allow_accept": True,
                "allow_edit": False,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": f"Run {action}?",
        }
        return {"answers": [{"node": action, "response": interrupt(request)[0]}]}

    return node


builder = StateGraph(State)
builder.add_node("left", _ask("left"))
builder.add_node("right", _ask("right"))
builder.add_edge(START, "left")
builder.add_edge(START, "right")
builder.add_edge("left", END)
builder.add_edge("right", END)
graph = builder.compile()
