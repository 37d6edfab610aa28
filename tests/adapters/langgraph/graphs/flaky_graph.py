"""Plain LangGraph, as its docs write a graph: three nodes in a row; each records that it ran
in a file (a side effect outside the checkpoints), and the third raises while a flag file
exists (an outage it cannot get past until someone fixes it)."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    workdir: str  # where the side-effect log and the flag live
    log: Annotated[list[str], operator.add]


def _record(state: State, node: str) -> None:
    with open(Path(state["workdir"]) / "effects.log", "a") as f:
        f.write(node + "\n")


def fetch(state: State) -> State:
    _record(state, "fetch")
    return {"log": ["fetch"]}


def charge(state: State) -> State:
    _record(state, "charge")
    return {"log": ["charge"]}


def notify(state: State) -> State:
    _record(state, "notify")
    if (Path(state["workdir"]) / "outage.flag").exists():
        raise ConnectionError("mail relay refused the connection")
    return {"log": ["notify"]}


builder = StateGraph(State)
builder.add_node("fetch", fetch)
builder.add_node("charge", charge)
builder.add_node("notify", notify)
builder.add_edge(START, "fetch")
builder.add_edge("fetch", "charge")
builder.add_edge("charge", "notify")
builder.add_edge("notify", END)
graph = builder.compile()
