"""A restate-sdk service written the way the SDK's examples write one (no irq code), served
by hypercorn (``recovery_services:app``) for ``test_restate_recovery.py``.

``Orders/fulfil`` runs three ``ctx.run`` steps, ``reserve``, ``charge`` and ``ship``;
``ship`` fails while the file named in the request's ``broken`` field exists. Every step
body appends ``<order> <step>`` to the file named by ``IRQ_RESTATE_STEPS`` (the side effects
the test counts, keyed by order so a restarted invocation counts with its original), and
the handler appends ``<order> notify`` *between* two ``ctx.run`` calls: code outside a
``ctx.run`` is not journaled and runs again on every replay.

``Orders`` pauses after three attempts (the invocation retry policy, ``on_max_attempts``
pause: Restate gives up); ``Payouts/pay`` is the same handler whose ``ship`` step gives up
after two attempts of its own (``RunOptions.max_attempts``): the invocation then fails.
``Backoff/fulfil`` retries every 400 ms for a long time (a step backing off); ``Standby``
is the same, served by a second process (``standby_app``) that a test kills.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import restate
from restate import Context, InvocationRetryPolicy, RunOptions


def record(order: str, what: str) -> str:
    with Path(os.environ["IRQ_RESTATE_STEPS"]).open("a") as fh:
        fh.write(f"{order} {what}\n")
    return what


def ship(order: str, broken: str) -> str:
    record(order, "ship")
    if broken and Path(broken).exists():
        raise RuntimeError(f"carrier API down for order {order}")
    return "shipped"


async def _fulfil(ctx: Context, req: dict[str, Any], ship_options: RunOptions[str]) -> str:
    order = str(req["order"])
    await ctx.run_typed("reserve", record, RunOptions(), order, "reserve")
    await ctx.run_typed("charge", record, RunOptions(), order, "charge")
    record(order, "notify")  # outside ctx.run: runs again on every replay
    return await ctx.run_typed("ship", ship, ship_options, order, str(req.get("broken", "")))


orders = restate.Service(
    "Orders",
    invocation_retry_policy=InvocationRetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        max_interval=timedelta(milliseconds=400),
        max_attempts=3,
        on_max_attempts="pause",
    ),
)
payouts = restate.Service(
    "Payouts",
    invocation_retry_policy=InvocationRetryPolicy(initial_interval=timedelta(milliseconds=200)),
)
backoff = restate.Service(
    "Backoff",
    invocation_retry_policy=InvocationRetryPolicy(
        initial_interval=timedelta(milliseconds=400),
        max_interval=timedelta(milliseconds=400),
        max_attempts=1000,
    ),
)


@orders.handler()
async def fulfil(ctx: Context, req: dict[str, Any]) -> str:
    return await _fulfil(ctx, req, RunOptions())


@payouts.handler()
async def pay(ctx: Context, req: dict[str, Any]) -> str:
    return await _fulfil(
        ctx, req, RunOptions(max_attempts=2, initial_retry_interval=timedelta(milliseconds=100))
    )


@backoff.handler(name="fulfil")
async def backoff_fulfil(ctx: Context, req: dict[str, Any]) -> str:
    return await _fulfil(ctx, req, RunOptions())


standby = restate.Service(
    "Standby",
    invocation_retry_policy=InvocationRetryPolicy(
        initial_interval=timedelta(milliseconds=400),
        max_interval=timedelta(milliseconds=400),
        max_attempts=1000,
    ),
)


@standby.handler(name="fulfil")
async def standby_fulfil(ctx: Context, req: dict[str, Any]) -> str:
    return await _fulfil(ctx, req, RunOptions())


app = restate.app(services=[orders, payouts, backoff])
standby_app = restate.app(services=[standby])
