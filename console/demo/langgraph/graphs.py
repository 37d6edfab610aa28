"""The demo's LangGraph graphs, written with plain ``langgraph`` and ``langchain`` (no irq
imports): the Agent Server (``langgraph dev``) loads them from this file.

- ``expenses``: a node asks with ``interrupt()`` in the Agent Inbox ``HumanInterrupt`` shape
  (approve, edit, reject, respond);
- ``ops_agent``: a langchain agent with ``HumanInTheLoopMiddleware`` whose scripted model (no
  LLM, no network) wants to restart a service and page the on-call engineer in one turn;
- ``ask_user``: ``interrupt()`` with a plain question (answered with respond);
- ``report``: a slow async step (pause it: the step runs again from its start on resume);
- ``status_update``: drafts a customer-facing incident update and stops *before* publishing it
  at a static breakpoint (``compile(interrupt_before=["publish"])``, LangGraph's own
  human-review idiom: no ``interrupt()`` call); approve publishes the draft, edit changes it
  first, reject ends the thread unpublished.
"""

from __future__ import annotations

import asyncio
import json
import operator
from typing import Annotated, Any, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

# ------------------------------------------------------------------------- expenses


class Expense(TypedDict, total=False):
    claim: dict[str, Any]
    response: Any
    outcome: str


def check(state: Expense) -> Expense:
    return {"claim": {"employee": "j.doe", "amount_eur": 1840, "purpose": "GPU rental"}}


def approve_claim(state: Expense) -> Expense:
    claim = state["claim"]
    response = interrupt(
        {
            "action_request": {"action": "reimburse", "args": claim},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": (
                f"Reimburse {claim['amount_eur']} EUR to {claim['employee']}?\n\n"
                "Above the 1,000 EUR limit for automatic approval."
            ),
        }
    )[0]
    return {"response": response}


def pay(state: Expense) -> Expense:
    response = state["response"]
    if response["type"] == "accept":
        return {"outcome": f"paid {state['claim']}"}
    if response["type"] == "edit":
        return {"outcome": f"paid {response['args']['args']}"}
    return {"outcome": f"not paid ({response['type']}: {response.get('args')})"}


_expenses = StateGraph(Expense)
_expenses.add_node("check", check)
_expenses.add_node("approve_claim", approve_claim)
_expenses.add_node("pay", pay)
_expenses.add_edge(START, "check")
_expenses.add_edge("check", "approve_claim")
_expenses.add_edge("approve_claim", "pay")
_expenses.add_edge("pay", END)
expenses = _expenses.compile()


# ------------------------------------------------------------------------ ops agent


@tool
def restart_service(service: str, region: str) -> str:
    """Restart a service in a region."""
    return f"restarted {service} in {region}"


@tool
def page_oncall(team: str, message: str) -> str:
    """Page the on-call engineer of a team."""
    return f"paged {team}: {message}"


class ScriptedModel(BaseChatModel):
    """Asks for the tool calls in the user's message (JSON), then answers "done"."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        if any(isinstance(m, ToolMessage) for m in messages[last:]):
            message = AIMessage(content="done")
        else:
            calls = json.loads(str(messages[last].content))["calls"]
            message = AIMessage(
                content="",
                tool_calls=[
                    {"name": c["name"], "args": c["args"], "id": f"call_{i}", "type": "tool_call"}
                    for i, c in enumerate(calls)
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


ops_agent = create_agent(
    model=ScriptedModel(),
    tools=[restart_service, page_oncall],
    middleware=[
        HumanInTheLoopMiddleware(
            interrupt_on={
                "restart_service": True,
                "page_oncall": {"allowed_decisions": ["approve", "edit", "reject"]},
            }
        )
    ],
)


# ------------------------------------------------------------------------- ask user


class Question(TypedDict, total=False):
    answer: Any


def ask(state: Question) -> Question:
    return {
        "answer": interrupt(
            {"question": "Which cost centre should the cluster bill?", "options": ["R&D", "Ops"]}
        )
    }


_ask = StateGraph(Question)
_ask.add_node("ask", ask)
_ask.add_edge(START, "ask")
_ask.add_edge("ask", END)
ask_user = _ask.compile()


# --------------------------------------------------------------------------- report


class Report(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def gather(state: Report) -> Report:
    return {"log": ["gather"]}


async def write(state: Report) -> Report:
    await asyncio.sleep(90)  # async: a pause (cancel action=interrupt) stops it at once
    return {"log": ["write"]}


_report = StateGraph(Report)
_report.add_node("gather", gather)
_report.add_node("write", write)
_report.add_edge(START, "gather")
_report.add_edge("gather", "write")
_report.add_edge("write", END)
report = _report.compile()


# -------------------------------------------------------------------- status_update


class StatusUpdate(TypedDict, total=False):
    incident: str
    draft: dict[str, Any]
    published: str


def draft(state: StatusUpdate) -> StatusUpdate:
    incident = state.get("incident") or "INC-4711"
    return {"draft": {
        "incident": incident,
        "audience": "all customers",
        "title": "Degraded checkout in eu-west-1",
        "body": "Some payments failed between 14:02 and 14:31 UTC. Retried payments went "
                "through; no card was charged twice. We are monitoring.",
    }}


def publish(state: StatusUpdate) -> StatusUpdate:
    notice = state.get("draft") or {}
    return {"published": f"status page: {notice.get('title', '?')} ({notice.get('audience')})"}


_status = StateGraph(StatusUpdate)
_status.add_node("draft", draft)
_status.add_node("publish", publish)
_status.add_edge(START, "draft")
_status.add_edge("draft", "publish")
_status.add_edge("publish", END)
status_update = _status.compile(interrupt_before=["publish"])
