"""``obligation_overdue``: an obligation (a policy's ``oblige`` duty) still open past its
``due_at`` (the obligation store marks it ``overdue``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from console.alert_model import AlertKind, Condition
from console.alert_sources.run_subject import at_text
from console.policy.model import Obligation


def obligation_overdue(obligations: Iterable[Obligation], now: datetime) -> list[Condition]:
    out = []
    for ob in obligations:
        if ob.state not in ("open", "overdue") or ob.due_at is None or ob.due_at > now:
            continue
        head = ob.run_id.split("/", 1)[0]
        backend, _, context = head.partition(":")
        out.append(Condition(
            kind=AlertKind.OBLIGATION_OVERDUE, subject=ob.id, run=ob.run_id, backend=backend,
            context=context, since=ob.due_at,
            detail=f"obligation overdue (due {at_text(ob.due_at)}): {ob.what} (rule "
                   f"{ob.rule})",
            action=f"do it, then irq obligation fulfil {ob.id} --note TEXT",
            facts={"rule": ob.rule}))
    return out
