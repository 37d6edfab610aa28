"""A Temporal agent whose tool calls go through irq's policy guard (``policy_tools``).

``PolicyAgent`` runs the calls it is given in order (``{"calls": [{"tool", "args", "data"?,
"sensitive"?}], "agent", "team", "fulfil"?: [{"rule", "note"}]}``) through
:func:`guarded_tool`, then fulfils the obligations of the rules in ``fulfil``, and returns the
opened obligation ids and one outcome per call: ``ran`` (with the tool's result), ``prohibited`` or ``rejected``. The tool activities
record every execution in :data:`EXECUTED` (for a worker in the test's process) and, when
``IRQ_TEST_TOOL_LOG`` names a file, as one JSON line there (for a worker process): the side
effect a test checks.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from backend_adapters.temporal.agent import Interrupts
    from backend_adapters.temporal.policy_tools import (
        ToolProhibitedError,
        ToolRejectedError,
        fulfil_obligation,
        guarded_tool,
        policy_activities,
    )

#: (workflow id, tool, args) of every tool execution in this process
EXECUTED: list[tuple[str, str, dict[str, Any]]] = []


def _executed(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    wid = activity.info().workflow_id or ""
    EXECUTED.append((wid, tool, dict(args)))
    log = os.environ.get("IRQ_TEST_TOOL_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(json.dumps({"wf": wid, "tool": tool, "args": args}) + "\n")
    return {"tool": tool, "args": dict(args)}


@activity.defn
async def refund(args: dict[str, Any]) -> dict[str, Any]:
    return _executed("refund", args)


@activity.defn
async def delete_backup(args: dict[str, Any]) -> dict[str, Any]:
    return _executed("delete_backup", args)


@activity.defn
async def read_records(args: dict[str, Any]) -> dict[str, Any]:
    return _executed("read_records", args)


@activity.defn
async def deploy(args: dict[str, Any]) -> dict[str, Any]:
    return _executed("deploy", args)


TOOLS = {
    "refund": refund,
    "delete_backup": delete_backup,
    "read_records": read_records,
    "deploy": deploy,
}


@workflow.defn
class PolicyAgent:
    @workflow.init
    def __init__(self, task: dict[str, Any]) -> None:
        self.irq = Interrupts()

    @workflow.run
    async def run(self, task: dict[str, Any]) -> dict[str, Any]:
        outcomes: list[dict[str, Any]] = []
        for call in task["calls"]:
            tool = call["tool"]
            try:
                result = await guarded_tool(
                    self.irq,
                    tool,
                    call.get("args") or {},
                    TOOLS[tool],
                    agent=task.get("agent", "billing-agent"),
                    team=task.get("team", "finance"),
                    data=call.get("data") or (),
                    sensitive=bool(call.get("sensitive")),
                    start_to_close_timeout=timedelta(seconds=10),
                )
                outcomes.append({"tool": tool, "outcome": "ran", "result": result})
            except ToolProhibitedError as err:
                outcomes.append(
                    {"tool": tool, "outcome": "prohibited", "winner": err.decision.get("winner")}
                )
            except ToolRejectedError as err:
                outcomes.append(
                    {
                        "tool": tool,
                        "outcome": "rejected",
                        "rule": err.rule,
                        "feedback": err.feedback,
                    }
                )
        for wanted in task.get("fulfil") or []:  # {"rule", "note"}: fulfil what a call opened
            for oid in self.irq.obligations:
                if oid.endswith("/" + wanted["rule"]):
                    await fulfil_obligation(oid, wanted.get("note", ""))
        return {
            "outcomes": outcomes,
            "tool_calls": self.irq.tool_calls,
            "obligations": list(self.irq.obligations),
        }


WORKFLOWS = [PolicyAgent]
ACTIVITIES = [refund, delete_backup, read_records, deploy, *policy_activities()]
