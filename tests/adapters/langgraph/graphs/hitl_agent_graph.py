"""Plain langchain: an agent with ``HumanInTheLoopMiddleware`` (the second interrupt shape).

No irq imports, no network: a scripted chat model (langchain_core's chat model interface)
emits the tool calls named in the user's message (JSON ``{"calls": [{"name", "args"}]}``) on
its first turn and a final answer once tool results came back. ``send_email`` allows all
four decisions, ``delete_file`` only approve and reject.
"""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool


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


graph = create_agent(
    model=ScriptedModel(),
    tools=[send_email, delete_file],
    middleware=[
        HumanInTheLoopMiddleware(
            interrupt_on={
                "send_email": True,
                "delete_file": {"allowed_decisions": ["approve", "reject"]},
            }
        )
    ],
)
