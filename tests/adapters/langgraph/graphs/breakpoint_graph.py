"""Plain LangGraph: a tool-calling agent with a static breakpoint, as LangGraph's own
"breakpoints" how-to writes it (``builder.compile(interrupt_before=["tools"])``).

No irq imports, no network: a scripted chat model (langchain_core's chat model interface)
emits the tool calls named in the user's message (JSON ``{"calls": [{"name", "args"}]}``) on
its first turn and a final answer once tool results came back. The graph never calls
``interrupt()``: it stops before ``tools`` with ``next == ["tools"]`` and no interrupt value.
``graph_after`` stops after ``agent`` instead (``interrupt_after=["agent"]``).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}: {body}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


class ScriptedModel(BaseChatModel):
    """Emits the tool calls the last user message asks for, then a final answer."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        answered = any(isinstance(m, ToolMessage) for m in messages[last_human:])
        if answered:
            message = AIMessage(content="done")
        else:
            script = json.loads(str(messages[last_human].content))
            message = AIMessage(
                content="",
                tool_calls=[
                    {"name": c["name"], "args": c["args"], "id": f"call_{i}", "type": "tool_call"}
                    for i, c in enumerate(script["calls"])
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


tools = [send_email, delete_file]
model = ScriptedModel().bind_tools(tools)


def agent(state: MessagesState) -> dict[str, Any]:
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("agent", agent)
builder.add_node("tools", ToolNode(tools))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", tools_condition)
builder.add_edge("tools", "agent")

graph = builder.compile(interrupt_before=["tools"])
graph_after = builder.compile(interrupt_after=["agent"])
plain = builder.compile()  # breakpoints given on the run instead (interrupt_before=...)
