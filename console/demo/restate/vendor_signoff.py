"""The demo's vendor sign-off: a Restate handler that waits for a person the way Restate's own
examples write it (``name, promise = ctx.awakeable()``, the id handed to an external system in
a ``ctx.run``, ``await promise``; no irq imports, no irq heartbeats).

An agent onboarding a supplier screens it, then asks compliance to sign off: the awakeable's id
goes to the compliance queue (here: a log line of the service) and the handler suspends. irq
finds the wait in what Restate records (the suspended invocation and its awakeable) and lists
it in the inbox (kind ``awakeable``); an operator's answer resolves it (a reject rejects it:
the handler sees a ``TerminalError``). Served with the demo's other handlers
(console/demo/restate/services.py); the feeder keeps one going (fleet.py).
"""

from __future__ import annotations

import logging
from typing import Any

import restate
from restate import Context

vendors = restate.Service("DemoVendors")
log = logging.getLogger("demo.vendors")


def screen(vendor: str) -> dict[str, Any]:
    """Sanctions and credit checks (what the agent found)."""
    return {"vendor": vendor, "sanctions": "no match", "credit": "B+", "country": "NL"}


def request_signoff(vendor: str, awakeable_id: str) -> str:
    """The compliance queue a person answers from (a ticket with the id to resolve)."""
    log.info("compliance sign-off requested for %s: resolve awakeable %s", vendor, awakeable_id)
    return awakeable_id


@vendors.handler()
async def onboard(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    vendor = str(req.get("vendor") or "acme-logistics")
    findings = await ctx.run_typed("screen vendor", screen, vendor=vendor)
    name, promise = ctx.awakeable(type_hint=dict)
    await ctx.run_typed("request compliance sign-off", request_signoff, vendor=vendor,
                        awakeable_id=name)
    try:
        signoff = await promise
    except restate.TerminalError as exc:
        return {"vendor": vendor, "findings": findings, "onboarded": False,
                "reason": str(exc)}
    return {"vendor": vendor, "findings": findings, "signoff": signoff, "onboarded": True}
