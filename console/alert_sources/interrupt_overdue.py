"""``interrupt_overdue``: a pending interrupt past its ``deadline_at`` (the agent's, a native
wait's timer, or the gateway's default per context: console/gateway/interrupt_deadlines.py).
The alert is the escalation: ``[[notify.webhooks]] events = ["interrupt_overdue"]`` routes it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import at_text
from console.model import Interrupt


def interrupt_overdue(interrupts: Iterable[Interrupt], now: datetime) -> list[Condition]:
    out = []
    for intr in interrupts:
        if intr.status != "pending" or intr.deadline_at is None or intr.deadline_at > now:
            continue
        head = intr.run_id.split("/", 1)[0]
        backend, _, context = head.partition(":")
        out.append(Condition(
            kind=AlertKind.INTERRUPT_OVERDUE, subject=intr.id, run=intr.run_id,
            backend=backend, context=context, since=intr.deadline_at,
            detail=f"interrupt {intr.id} overdue (deadline {at_text(intr.deadline_at)}): "
                   f"{intr.title}",
            action=f"decide it: irq approve|reject {intr.id}",
            facts={"interrupt_id": intr.id,
                   "deadline_at": intr.deadline_at.isoformat()}))
    return out
