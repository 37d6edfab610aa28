"""Human waits written the way Restate's own examples write them, importing nothing from irq
(issue 22): irq must find and answer them from what Restate records.

- ``NativeReview/review``: ``name, promise = ctx.awakeable()``; a ``ctx.run`` hands the id
  to an external system (here: a file) and returns it; ``await promise``.
- ``NativeSilent/review``: the same, but the ``ctx.run`` that hands the id out returns
  nothing (the id is in no journaled result: only the suspension shows the wait).
- ``NativeSignup`` (a Workflow): ``run`` awaits ``ctx.promise("link_clicked")``, answered by
  the shared handler ``click``; ``status`` peeks at it (shared, but it resolves nothing).
- ``NativeOrder`` (a Workflow): ``run`` awaits ``ctx.promise("decision")``, and two shared
  handlers resolve it, ``approve`` (any JSON) and ``set_limit`` (a typed request: its JSON
  Schema is in the deployment's metadata).

- ``NativePayment`` (a Workflow): ``run`` selects between ``ctx.promise("verify.payment")``
  and ``ctx.sleep(1 h)`` (the SDK's own ``restate.select`` example): the sleep is the wait's
  deadline; ``verify`` resolves it.

Every handler appends ``<invocation id> <what> <json>`` to the file named by
``IRQ_RESTATE_STEPS`` (outside Restate), so a test sees what the handler really received.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import restate
from pydantic import BaseModel
from restate import Context, Workflow, WorkflowContext, WorkflowSharedContext

review_service = restate.Service("NativeReview")
silent_service = restate.Service("NativeSilent")
signup = Workflow("NativeSignup")
order = Workflow("NativeOrder")


def record(inv: str, what: str, value: Any = None) -> None:
    path = Path(os.environ["IRQ_RESTATE_STEPS"])
    with path.open("a") as fh:
        fh.write(f"{inv} {what} {json.dumps(value)}\n")


def request_human_review(inv: str, awakeable_id: str) -> str:
    """The external system a reviewer answers from (a ticket, an e-mail with a link)."""
    record(inv, "review-requested", awakeable_id)
    return awakeable_id


@review_service.handler()
async def review(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    name, promise = ctx.awakeable()
    await ctx.run_typed("request human review", request_human_review, inv=inv, awakeable_id=name)
    try:
        verdict = await promise
    except restate.TerminalError as exc:
        record(inv, "rejected", str(exc))
        return {"rejected": str(exc)}
    record(inv, "verdict", verdict)
    return {"verdict": verdict}


@silent_service.handler("review")
async def silent_review(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    inv = ctx.request().id
    name, promise = ctx.awakeable()

    def hand_out() -> None:
        record(inv, "review-requested", name)

    await ctx.run_typed("notify reviewer", hand_out)
    verdict = await promise
    record(inv, "verdict", verdict)
    return {"verdict": verdict}


@signup.main()
async def run(ctx: WorkflowContext, user: dict[str, Any]) -> bool:
    key = ctx.key()
    await ctx.run_typed("send link", lambda: record(key, "link-sent", user))
    clicked = await ctx.promise("link_clicked").value()
    record(key, "clicked", clicked)
    return True


@signup.handler()
async def click(ctx: WorkflowSharedContext, secret: Any) -> None:
    await ctx.promise("link_clicked").resolve(secret)


@signup.handler()
async def status(ctx: WorkflowSharedContext) -> Any:
    return await ctx.promise("link_clicked").peek()


class Limit(BaseModel):
    limit: int
    reason: str = ""


@order.main("run")
async def order_run(ctx: WorkflowContext, req: dict[str, Any]) -> Any:
    key = ctx.key()
    await ctx.run_typed("reserve stock", lambda: record(key, "reserved", req))
    decision = await ctx.promise("decision").value()
    record(key, "decision", decision)
    return decision


@order.handler()
async def approve(ctx: WorkflowSharedContext, decision: Any) -> None:
    await ctx.promise("decision").resolve(decision)


@order.handler()
async def set_limit(ctx: WorkflowSharedContext, limit: Limit) -> None:
    await ctx.promise("decision").resolve(limit.model_dump())


payment = Workflow("NativePayment")


@payment.main("run")
async def payment_run(ctx: WorkflowContext, req: dict[str, Any]) -> dict[str, Any]:
    key = ctx.key()
    match await restate.select(
        result=ctx.promise("verify.payment").value(), timeout=ctx.sleep(timedelta(hours=1))
    ):
        case ["result", verdict]:
            record(key, "verified", verdict)
            return {"success": True, "verdict": verdict}
        case _:
            raise restate.TerminalError("Payment verification timed out", status_code=410)


@payment.handler()
async def verify(ctx: WorkflowSharedContext, verdict: Any) -> None:
    await ctx.promise("verify.payment").resolve(verdict)


app = restate.app(services=[review_service, silent_service, signup, order, payment])
