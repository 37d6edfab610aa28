"""Agent-side helpers for ``restate-sdk`` handlers (no irq server code is imported).

:func:`ask` raises an interrupt in irq's convention (``conventions.py``): it creates an
awakeable, publishes the pending interrupt as the result of a ``ctx.run`` named
``irq:interrupt`` (journaled, so replays publish nothing new), then awaits the decision::

    from backend_adapters.restate.agent import ask

    @svc.handler()
    async def wire(ctx: restate.Context, req: dict) -> dict:
        decision = await ask(ctx, "Wire funds?", action="wire", args={"amount": 10},
                             args_schema={"type": "object", "required": ["amount"]},
                             allowed_decisions=["approve", "edit", "reject"])
        if decision["type"] == "reject": ...

The decision is irq's common payload ``{"type", "args"?, "feedback"?, "response"?}``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from restate import Context

from backend_adapters.restate.conventions import INTERRUPT_STEP, PublishedInterrupt

DEFAULT_DECISIONS = ("approve", "reject")


async def ask(
    ctx: Context,
    title: str,
    *,
    action: str = "",
    args: dict[str, Any] | None = None,
    args_schema: dict[str, Any] | None = None,
    allowed_decisions: tuple[str, ...] | list[str] = DEFAULT_DECISIONS,
    description: str = "",
    interrupt_id: str = "",
) -> dict[str, Any]:
    """Publish a pending interrupt and wait durably for irq's decision on it."""
    awakeable_id, future = ctx.awakeable(type_hint=dict)

    def publish() -> dict[str, Any]:
        published: PublishedInterrupt = {
            "awakeable_id": awakeable_id,
            "interrupt_id": interrupt_id or awakeable_id,
            "title": title,
            "description": description,
            "action": action,
            "args": dict(args or {}),
            "args_schema": args_schema,
            "allowed_decisions": list(allowed_decisions),
            "created_at": datetime.now(UTC).isoformat(),
        }
        return dict(published)

    await ctx.run_typed(INTERRUPT_STEP, publish)
    return cast(dict[str, Any], await future)
