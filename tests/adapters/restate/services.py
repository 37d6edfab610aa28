"""Plain restate-sdk services for the adapter tests, served by hypercorn (``services:app``).

Every ``ctx.run`` body appends one line ``<invocation id> <step>`` to the file named by
``IRQ_RESTATE_STEPS`` (outside Restate), so a test counts real executions; a handler that
receives a decision appends ``<invocation id> decision <json>`` to the same file.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import restate
from restate import Context, InvocationRetryPolicy

from backend_adapters.restate.agent import AgentResource, AgentRun, ask

steps = restate.Service("IrqSteps")
beats = restate.Service("IrqBeats")
human = restate.Service("IrqHuman")


def record(line: str) -> None:
    path = Path(os.environ["IRQ_RESTATE_STEPS"])
    with path.open("a") as fh:
        fh.write(line + "\n")
        fh.flush()


def _step(inv: str, name: str, slow_s: float = 0.0) -> str:
    record(f"{inv} {name}")
    deadline = time.monotonic() + slow_s
    while time.monotonic() < deadline:  # a blocking body: SIGKILL/SIGSTOP land inside it
        time.sleep(0.05)
    if slow_s:
        record(f"{inv} {name}-end")
    return name


@steps.handler()
async def process(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    await ctx.run_typed("step-1", _step, restate.RunOptions(), inv, "step-1")
    await ctx.run_typed("step-2", _step, restate.RunOptions(), inv, "step-2")
    slow = float(req.get("slow_s", 0))
    await ctx.run_typed("slow-step", _step, restate.RunOptions(), inv, "slow-step", slow)
    if req.get("sleep_s"):
        await ctx.sleep(timedelta(seconds=float(req["sleep_s"])))
    await ctx.run_typed("step-4", _step, restate.RunOptions(), inv, "step-4")
    return {"ok": True}


@human.handler()
async def approve(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    await ctx.run_typed("prepare", _step, restate.RunOptions(), inv, "prepare")
    try:
        decision = await ask(
            ctx,
            req.get("title", "Wire funds?"),
            action="wire",
            args={"amount": 10, "to": "acme"},
            args_schema={
                "type": "object",
                "properties": {"amount": {"type": "integer", "maximum": 100}},
                "required": ["amount"],
            },
            allowed_decisions=req.get("allowed", ["approve", "edit", "reject", "respond"]),
        )
    except restate.TerminalError as exc:
        await ctx.run_typed("released", _step, restate.RunOptions(), inv, "released")
        raise exc
    await ctx.run_typed(
        "record-decision", lambda: record(f"{inv} decision {json.dumps(decision)}")
    )
    return {"decision": decision}


flaky = restate.Service(
    "IrqFlaky",
    invocation_retry_policy=InvocationRetryPolicy(
        initial_interval=timedelta(seconds=30), max_attempts=1000
    ),
)


@flaky.handler()
async def charge(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    await ctx.run_typed("before", _step, restate.RunOptions(), inv, "before")

    def call_psp() -> str:
        record(f"{inv} call-psp")
        if not Path(os.environ["IRQ_RESTATE_STEPS"] + ".fixed").exists():
            raise RuntimeError("psp unavailable")
        return "charged"

    await ctx.run_typed("call-psp", call_psp)
    return {"ok": True}


fragile = restate.Service(
    "IrqFragile",
    invocation_retry_policy=InvocationRetryPolicy(
        initial_interval=timedelta(milliseconds=200), max_attempts=2, on_max_attempts="pause"
    ),
)


@fragile.handler()
async def call(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    """Fails every attempt: Restate pauses it after 2 attempts."""
    inv = ctx.request().id

    def call_psp() -> str:
        record(f"{inv} call-psp")
        raise RuntimeError("psp still unavailable")

    await ctx.run_typed("call-psp", call_psp)
    return {"ok": True}


@beats.handler()
async def work(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    """An instrumented handler: beats to irq, holds a GPU, releases it when cancelled."""
    inv = ctx.request().id
    gpu = AgentResource("gpu-0", kind="gpu", release=lambda: record(f"{inv} released gpu-0"))
    async with AgentRun(ctx, name="work", resources=[gpu], interval_s=0.5, timeout_s=3):
        await ctx.run_typed(
            "work", _step, restate.RunOptions(), inv, "work", float(req.get("slow_s", 0))
        )
        if req.get("sleep_s"):
            await ctx.sleep(timedelta(seconds=float(req["sleep_s"])))
    return {"ok": True}


app = restate.app(services=[steps, human, flaky, beats, fragile])
