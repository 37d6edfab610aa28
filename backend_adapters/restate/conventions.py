"""The names irq uses on a Restate server, shared by the adapter and the agent helpers.

Restate journals every ``ctx.run`` and has awakeables, but an awakeable leaves no journal
entry and its id is known only to the handler (``docs/backends/restate.md`` §2, §4). So a
handler that wants a human decision **publishes** the pending interrupt as the *result of a
``ctx.run`` named* :data:`INTERRUPT_STEP` (``irq:interrupt``), right before awaiting the
awakeable. That works for plain Services, Virtual Objects and Workflows alike (state keys
would need an object or workflow), and it is replayed, never re-run, after a crash.

The step's result is an :class:`PublishedInterrupt` (JSON):
``{"awakeable_id": "sign_1…", "interrupt_id", "title", "description", "action", "args",
"args_schema", "allowed_decisions", "created_at", "policy"?, "deadline_at"?}``.

The interrupt is pending while the journal holds no ``Notification: Signal`` for the
awakeable's signal index (decoded from the awakeable id) and the invocation is not
completed. The decision reaches the handler as the awakeable's value: irq's common decision
payload ``{"type": approve|edit|reject|respond, "args"?, "feedback"?, "response"?}``.
"""

from __future__ import annotations

import base64
import string

from backend_adapters.run_records import InterruptPayload

BACKEND = "restate"

#: the ``ctx.run`` name whose result publishes a pending interrupt
INTERRUPT_STEP = "irq:interrupt"
#: journal step names starting with this are irq's own, not the handler's work
IRQ_STEP_PREFIX = "irq:"


class PublishedInterrupt(InterruptPayload, total=False):
    awakeable_id: str


#: signal indexes below this are Restate's own (1 = cancel); awakeables count up from it
FIRST_AWAKEABLE_SIGNAL = 17
_BASE62 = string.digits + string.ascii_lowercase + string.ascii_uppercase


def _invocation_bytes(invocation_id: str) -> bytes | None:
    """The 24 bytes an invocation id stands for (partition key u64 + uuid u128), as they are
    in an awakeable id. Measured on 1.7.12: ``inv_1`` + 11 base62 digits [0-9a-zA-Z] of the
    partition key + 22 of the uuid, each number written little-endian."""
    body = invocation_id.removeprefix("inv_1")
    if body == invocation_id or len(body) != 33:
        return None
    out = b""
    for digits, size in ((body[:11], 8), (body[11:], 16)):
        number = 0
        for char in digits:
            value = _BASE62.find(char)
            if value < 0:
                return None
            number = number * 62 + value
        if number >= 1 << (8 * size):
            return None
        out += number.to_bytes(size, "little")
    return out


def awakeable_id(invocation_id: str, index: int) -> str | None:
    """The id of awakeable ``index`` of an invocation, as ``ctx.awakeable()`` returned it
    (``sign_1`` + base64url(invocation id bytes + u32 big-endian index)); None when the
    invocation id is not of the form measured. Lets irq answer an awakeable whose id the
    handler handed out only outside Restate: the suspension names its signal index."""
    raw = _invocation_bytes(invocation_id)
    if raw is None or not 0 <= index < 1 << 32:
        return None
    body = base64.urlsafe_b64encode(raw + index.to_bytes(4, "big")).decode().rstrip("=")
    return "sign_1" + body


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
