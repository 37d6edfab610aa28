"""The demo's restate-sdk handlers (served by hypercorn as ``console.demo.restate.services:app``).

- ``DemoRefunds/refund``: looks the order up, asks irq whether to refund (edit-able amount up
  to 500), then issues it; with ``IRQ_DEMO_GUARDED=1`` (``irq demo`` with its policy) the
  refund is a guarded tool call of the billing agent instead: the policy decides (over 100 EUR:
  an approval naming ``refund-approval``);
- ``DemoSupport/clarify``: asks the operator a question (respond or reject);
- ``DemoReports/nightly``: three slow steps holding a warehouse connection, with heartbeats to
  irq (``AgentRun``; the connection is released when the invocation is cancelled);
- ``DemoPayments/charge``: the payment provider fails the first attempts, so the invocation
  is ``backing_off`` for a while before it succeeds;
- ``DemoVendors/onboard`` (vendor_signoff.py, plain restate-sdk: no irq import): waits on an
  awakeable for a compliance sign-off, the way Restate's own examples wait for a person.
"""

from __future__ import annotations

import asyncio
import os
import random
from datetime import timedelta
from typing import Any

import restate
from restate import Context, InvocationRetryPolicy

from backend_adapters.restate.agent import (
    AgentResource,
    AgentRun,
    ToolProhibitedError,
    ToolRejectedError,
    ask,
    guarded_tool,
)
from console.demo.restate.vendor_signoff import vendors

#: set by the demo when its gateway runs the demo policy: refunds go through the policy guard
GUARDED = os.environ.get("IRQ_DEMO_GUARDED") == "1"
#: multiplies the duration of every step (like the other demo fleets' ``--step-scale``)
STEP_SCALE = float(os.environ.get("IRQ_DEMO_STEP_SCALE") or 1.0)
REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount": {"type": "integer", "minimum": 1, "maximum": 500}},
    "required": ["amount"],
}

refunds = restate.Service("DemoRefunds")
support = restate.Service("DemoSupport")
reports = restate.Service("DemoReports")
payments = restate.Service(
    "DemoPayments",
    invocation_retry_policy=InvocationRetryPolicy(
        initial_interval=timedelta(seconds=3), exponentiation_factor=2.0,
        max_interval=timedelta(seconds=20), max_attempts=50,
    ),
)
_attempts: dict[str, int] = {}


async def _work(name: str, seconds: float) -> str:
    # a coroutine, not a blocking function: restate-sdk runs a plain function in the loop's
    # thread pool, which asyncio.run() waits for on exit: every stop of the service waited
    # out the step in flight (the nightly report's take 15 s) past the stop grace, into
    # SIGKILL; a sleeping coroutine is cancelled with its handler
    await asyncio.sleep(seconds * STEP_SCALE)
    return name


@refunds.handler()
async def refund(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    order = str(req.get("order") or "A-1001")
    amount = int(req.get("amount") or 120)
    await ctx.run_typed("lookup-order", _work, restate.RunOptions(), "lookup-order", 1.0)
    if GUARDED:
        return await _guarded_refund(ctx, order, amount)
    decision = await ask(
        ctx,
        f"Refund {amount} EUR for order {order}?",
        action="refund",
        args={"order": order, "amount": amount},
        args_schema=REFUND_SCHEMA,
        allowed_decisions=["approve", "edit", "reject"],
        description="the customer says the parcel arrived damaged",
    )
    if decision["type"] == "reject":
        return {"refunded": False, "feedback": decision.get("feedback")}
    final = (decision.get("args") or {}).get("amount", amount)
    await ctx.run_typed("issue-refund", _work, restate.RunOptions(), "issue-refund", 1.0)
    return {"refunded": final}


async def _issue_refund(order: str, amount: int, currency: str) -> int:
    await _work("issue-refund", 1.0)
    return amount


async def _guarded_refund(ctx: Context, order: str, amount: int) -> dict[str, Any]:
    try:
        final = await guarded_tool(
            ctx,
            "issue_refund",
            {"order": order, "amount": amount, "currency": "EUR"},
            _issue_refund,
            agent="billing-agent",
            team="finance",
            args_schema=REFUND_SCHEMA,
        )
    except ToolProhibitedError as refused:
        return {"refunded": False, "prohibited": refused.decision.get("winner")}
    except ToolRejectedError as rejected:
        return {"refunded": False, "feedback": rejected.feedback}
    return {"refunded": final}


@support.handler()
async def clarify(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    answer = await ask(
        ctx,
        "Which warehouse should ship the replacement?",
        action="ask_user",
        allowed_decisions=["respond", "reject"],
    )
    await ctx.run_typed("create-shipment", _work, restate.RunOptions(), "create-shipment", 1.0)
    return {"answer": answer.get("response")}


@reports.handler()
async def nightly(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    conn = AgentResource("warehouse-conn", kind="db", on_pause="keep", on_cancel="release")
    async with AgentRun(ctx, name="nightly report", resources=[conn], interval_s=2) as run:
        for i, step in enumerate(("extract", "transform", "publish")):
            run.beat(progress=i / 3)
            await ctx.run_typed(step, _work, restate.RunOptions(), step, 15.0)
        run.beat(progress=1.0)
    return {"ok": True}


@payments.handler()
async def charge(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    await ctx.run_typed("reserve", _work, restate.RunOptions(), "reserve", 0.5)

    def call_psp() -> str:
        _attempts[inv] = _attempts.get(inv, 0) + 1
        if _attempts[inv] < random.randint(3, 5):
            raise RuntimeError("payment provider timed out (HTTP 504)")
        return "charged"

    await ctx.run_typed("call-psp", call_psp)
    return {"ok": True}


app = restate.app(services=[refunds, support, reports, payments, vendors])
