"""Plain LangGraph: a quick step, then a slow async step (cancellable at its next await)."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    seconds: float
    log: Annotated[list[str], operator.add]


def prepare(state: State) -> State:
    return {"log": ["prepare"]}


async def slow(state: State) -> State:
    await asyncio.sleep(state.get("seconds", 5.0))
    return {"log": ["slow"]}


builder = StateGraph(State)
builder.add_node("prepare", prepare)
builder.add_node("slow", slow)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "slow")
builder.add_edge("slow", END)
graph = builder.compile()
