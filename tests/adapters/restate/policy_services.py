"""A restate-sdk service whose tool calls go through irq's policy guard (``guarded_tool``),
served by hypercorn (``policy_services:app``) for ``test_restate_policy.py``.

``IrqPolicy/run`` runs the calls it is given (``{"calls": [{"tool", "args", "data"?}]}``) and
returns one outcome per call (``ran``, ``prohibited``, ``rejected``); then it fulfils the
obligations of the rules in ``fulfil`` (``[{"rule", "note"}]``). Every tool execution
appends ``<invocation id> <tool> <args json>`` to the file named by ``IRQ_RESTATE_STEPS``
(outside Restate), the side effect the test counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import restate
from restate import Context

from backend_adapters.restate.agent import (
    ToolProhibitedError,
    ToolRejectedError,
    fulfil_obligation,
    guarded_tool,
    opened_obligations,
)

policy = restate.Service("IrqPolicy")


def _tool(inv: str, name: str) -> Callable[..., dict[str, Any]]:
    def run(**args: Any) -> dict[str, Any]:
        with Path(os.environ["IRQ_RESTATE_STEPS"]).open("a") as fh:
            fh.write(f"{inv} {name} {json.dumps(args, sort_keys=True)}\n")
        return {"tool": name, "args": args}

    return run


@policy.handler()
async def run(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    outcomes: list[dict[str, Any]] = []
    for call in req["calls"]:
        tool = call["tool"]
        try:
            result = await guarded_tool(
                ctx,
                tool,
                call.get("args") or {},
                _tool(inv, tool),
                agent="billing-agent",
                team="finance",
                data=call.get("data") or [],
            )
            outcomes.append({"tool": tool, "outcome": "ran", "result": result})
        except ToolProhibitedError as err:
            outcomes.append({"tool": tool, "outcome": "prohibited", "winner": err.decision["winner"]})
        except ToolRejectedError as err:
            outcomes.append({"tool": tool, "outcome": "rejected", "feedback": err.feedback})
    for wanted in req.get("fulfil") or []:  # {"rule", "note"}: fulfil what a call opened
        for oid in opened_obligations(ctx):
            if oid.endswith("/" + wanted["rule"]):
                await fulfil_obligation(ctx, oid, wanted.get("note", ""))
    return {"outcomes": outcomes, "obligations": opened_obligations(ctx)}


app = restate.app(services=[policy])
