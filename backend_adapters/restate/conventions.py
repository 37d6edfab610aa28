"""The names irq uses on a Restate server, shared by the adapter and the agent helpers.

Restate journals every ``ctx.run`` and has awakeables, but an awakeable leaves no journal
entry and its id is known only to the handler (``docs/backends/restate.md`` §2, §4). So a
handler that wants a human decision **publishes** the pending interrupt as the *result of a
``ctx.run`` named* :data:`INTERRUPT_STEP` (``irq:interrupt``), right before awaiting the
awakeable. That works for plain Services, Virtual Objects and Workflows alike (state keys
would need an object or workflow), and it is replayed, never re-run, after a crash.

The step's result is an :class:`PublishedInterrupt` (JSON):
``{"awakeable_id": "sign_1…", "interrupt_id", "title", "description", "action", "args",
"args_schema", "allowed_decisions", "created_at"}``.

The interrupt is pending while the journal holds no ``Notification: Signal`` for the
awakeable's signal index (decoded from the awakeable id) and the invocation is not
completed. The decision reaches the handler as the awakeable's value: irq's common decision
payload ``{"type": approve|edit|reject|respond, "args"?, "feedback"?, "response"?}``.
"""

from __future__ import annotations

import base64

from backend_adapters.run_records import InterruptPayload

BACKEND = "restate"

#: the ``ctx.run`` name whose result publishes a pending interrupt
INTERRUPT_STEP = "irq:interrupt"
#: journal step names starting with this are irq's own, not the handler's work
IRQ_STEP_PREFIX = "irq:"


class PublishedInterrupt(InterruptPayload, total=False):
    awakeable_id: str


def signal_index(awakeable_id: str) -> int | None:
    """The signal index an awakeable id names (``sign_1`` + base64url(invocation id bytes +
    u32 big-endian index)); None when the id is not of that form."""
    if not awakeable_id.startswith("sign_1"):
        return None
    body = awakeable_id[len("sign_1") :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (ValueError, TypeError):
        return None
    if len(raw) < 4:
        return None
    return int.from_bytes(raw[-4:], "big")
