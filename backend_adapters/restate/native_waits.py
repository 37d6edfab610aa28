"""Waits for a person written with Restate's own idioms, no irq code in the handler
(issue 22; DESIGN.md §1 "Native waits are interrupts too"). Pure: rows in, interrupts out.

- **awakeable** (kind ``awakeable``): ``name, promise = ctx.awakeable()``, a ``ctx.run``
  hands ``name`` out, ``await promise``. Creating an awakeable journals nothing, so it is
  found two ways: (a) its id (``sign_1…``, this invocation's own) in a journaled ``ctx.run``
  result, visible as soon as that run's result is journaled; (b) the suspension's waiting
  set (``suspended_waiting_for_signals``, index >= 17), visible only once Restate suspends
  the invocation (after the inactivity timeout, 1 min by default); the id is then rebuilt
  from the invocation id and the index (``conventions.awakeable_id``).
- **promise** (kind ``promise``): a ``Command: GetPromise`` with no notification yet
  (``await ctx.promise("name").value()`` in a Workflow), answered through one of the
  workflow's shared handlers, listed from the deployment's service metadata.

A ``Command: Sleep`` journaled after the wait began and not yet completed is its deadline
(``restate.select(decision=…, timeout=ctx.sleep(…))``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend_adapters.restate.conventions import (
    FIRST_AWAKEABLE_SIGNAL,
    awakeable_id,
    signal_index,
)
from backend_adapters.restate.journal_view import HandedOut, JournalView, PromiseWait
from backend_adapters.restate.row_values import parse_time
from console.model import (
    Decision,
    DecisionKind,
    Interrupt,
    InterruptHandler,
    InterruptKind,
    utcnow,
)

#: the native id of a promise wait: ``promise:<promise name>`` (one open wait per name)
PROMISE_PREFIX = "promise:"
ALL_DECISIONS = [DecisionKind.APPROVE, DecisionKind.EDIT, DecisionKind.REJECT,
                 DecisionKind.RESPOND]
AWAKEABLE_HOW = (
    "waiting in its own code (no irq helper) on an awakeable: approve and edit resolve it "
    "with irq's decision payload ({type, args?}), respond with the response as it is, "
    "reject rejects it with your feedback (the handler sees TerminalError)"
)
PROMISE_HOW = (
    "waiting in its own code (no irq helper) on a durable promise, resolved through one of "
    "the workflow's shared handlers: respond sends the response as the handler's argument, "
    "edit the edited arguments, approve / reject irq's decision payload ({type, feedback?})"
)


@dataclass(frozen=True)
class AwakeableWait:
    awakeable_id: str
    index: int  # its signal index
    handed_out: HandedOut | None  # the ctx.run whose result holds the id, if one does
    began_at: datetime | None

    def site(self) -> str:
        if self.handed_out is not None:
            return (
                f"awakeable {self.awakeable_id} handed out by ctx.run "
                f"'{self.handed_out.step}' (#{self.handed_out.index})"
            )
        return (
            f"awakeable {self.awakeable_id} (signal {self.index}): the invocation is suspended "
            "waiting for it; no journaled result names it"
        )

    @property
    def after_index(self) -> int:
        return self.handed_out.index if self.handed_out is not None else -1


def awakeable_waits(row: dict[str, Any], view: JournalView) -> list[AwakeableWait]:
    """The awakeables of invocation ``row`` not resolved or rejected yet (irq's own
    ``irq:interrupt`` awakeables are left to the helper convention)."""
    inv = str(row.get("id") or "")
    helper = {signal_index(str(p.get("awakeable_id") or "")) for p in view.published}

    def open_index(index: object) -> bool:
        return (
            isinstance(index, int) and index >= FIRST_AWAKEABLE_SIGNAL
            and index not in helper and index not in view.signals
        )

    found: dict[int, AwakeableWait] = {}
    for handed in view.handed_out:
        index = signal_index(handed.awakeable_id)
        # an id of another invocation's awakeable in a result is not this one's wait
        if open_index(index) and index is not None and index not in found and (
            awakeable_id(inv, index) == handed.awakeable_id
        ):
            found[index] = AwakeableWait(handed.awakeable_id, index, handed, handed.at)
    if row.get("status") == "suspended":
        for index in row.get("suspended_waiting_for_signals") or []:
            rebuilt = awakeable_id(inv, index) if open_index(index) else None
            if rebuilt is not None and index not in found:
                found[index] = AwakeableWait(rebuilt, index, None, view.last_at)
    return [found[i] for i in sorted(found)]


def _deadline(view: JournalView, after_index: int) -> tuple[int, datetime] | None:
    later = [(i, at) for i, at in view.pending_sleeps if i > after_index]
    return min(later, key=lambda s: s[1]) if later else None


def _with_deadline(site: str, deadline: tuple[int, datetime] | None) -> str:
    if deadline is None:
        return site
    return f"{site}; sleep #{deadline[0]} until {deadline[1].isoformat()}"


def shared_handlers(service: dict[str, Any] | None, *, own: str) -> list[InterruptHandler]:
    """The shared handlers of a workflow's service metadata (``GET /services``): the ones
    that can resolve its promises. The workflow's ``run`` (type Workflow) and the waiting
    handler itself are not among them. ``input_json_schema`` is the handler's argument
    schema when the SDK published one (a typed argument), else none."""
    out = []
    for handler in (service or {}).get("handlers") or []:
        if not isinstance(handler, dict):
            continue
        name = str(handler.get("name") or "")
        if str(handler.get("ty") or "").lower() != "shared" or not name or name == own:
            continue
        schema = handler.get("input_json_schema")
        said = handler.get("documentation") or (
            f"input: {handler['input_description']}" if handler.get("input_description")
            else ""
        )
        out.append(InterruptHandler(
            name=name, kind="shared", description=str(said),
            args_schema=schema if isinstance(schema, dict) else None,
        ))
    return out


def native_interrupts(
    row: dict[str, Any], view: JournalView, service: dict[str, Any] | None, *, run_id: str
) -> list[Interrupt]:
    """The inbox items of invocation ``row``'s native waits (none once it completed)."""
    if row.get("status") == "completed":
        return []
    target = str(row.get("target") or "")
    fallback = parse_time(row.get("created_at")) or utcnow()
    out = []
    for wait in awakeable_waits(row, view):
        deadline = _deadline(view, wait.after_index)
        out.append(Interrupt(
            id=Interrupt.make_id(run_id, wait.awakeable_id),
            run_id=run_id,
            native_id=wait.awakeable_id,
            title=f"{target} waits on an awakeable",
            description=AWAKEABLE_HOW,
            allowed_decisions=list(ALL_DECISIONS),
            created_at=wait.began_at or fallback,
            kind=InterruptKind.AWAKEABLE,
            deadline_at=deadline[1] if deadline else None,
            wait_site=_with_deadline(wait.site(), deadline),
        ))
    for promise in view.promise_waits:
        out.append(promise_interrupt(row, view, promise, service, run_id=run_id,
                                     fallback=fallback))
    return out


def promise_interrupt(
    row: dict[str, Any], view: JournalView, wait: PromiseWait, service: dict[str, Any] | None,
    *, run_id: str, fallback: datetime,
) -> Interrupt:
    handlers = shared_handlers(service, own=str(row.get("target_handler_name") or ""))
    native = PROMISE_PREFIX + wait.key
    deadline = _deadline(view, wait.index)
    names = " or ".join(h.name for h in handlers) or "no shared handler"
    return Interrupt(
        id=Interrupt.make_id(run_id, native),
        run_id=run_id,
        native_id=native,
        title=f"{row.get('target') or ''} waits for promise '{wait.key}' ({names})",
        description=PROMISE_HOW,
        action=handlers[0].name if len(handlers) == 1 else "",
        allowed_decisions=list(ALL_DECISIONS),
        created_at=wait.at or fallback,
        kind=InterruptKind.PROMISE,
        handlers=handlers,
        deadline_at=deadline[1] if deadline else None,
        wait_site=_with_deadline(f"journal #{wait.index} GetPromise '{wait.key}'", deadline),
    )


def awakeable_answer(decision: Decision) -> tuple[bool, Any]:
    """What resolves (True, JSON value) or rejects (False, text) an awakeable: respond sends
    the response as it is, reject the operator's feedback, approve and edit irq's decision
    payload (``{"type": "approve"}``, ``{"type": "edit", "args": …}``)."""
    if decision.kind is DecisionKind.REJECT:
        return False, decision.feedback or "rejected"
    if decision.kind is DecisionKind.RESPOND:
        return True, decision.response
    return True, decision.payload()
