"""Plain LangGraph: interrupt() with an arbitrary value (neither HITL shape)."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    question: Any
    answer: Any


def ask(state: State) -> State:
    return {"answer": interrupt(state.get("question") or {"question": "Which account?"})}


builder = StateGraph(State)
builder.add_node("ask", ask)
builder.add_edge(START, "ask")
builder.add_edge("ask", END)
graph = builder.compile()


def ask_picky(state: State) -> State:
    answer = interrupt({"question": "Which account? (answer {\"account\": NAME})"})
    return {"answer": answer["account"].upper()}  # crashes on any other answer


picky_builder = StateGraph(State)
picky_builder.add_node("ask", ask_picky)
picky_builder.add_edge(START, "ask")
picky_builder.add_edge("ask", END)
picky = picky_builder.compile()
