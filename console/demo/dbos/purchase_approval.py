"""The demo's purchase approval: a DBOS workflow that waits for a person the way DBOS's own
docs write it (``DBOS.recv`` on a topic, with a timeout; no irq imports, no heartbeats).

An agent drafts a purchase order for GPU capacity, publishes the topic its approver answers
on (the ``recv_topic`` event, plain ``DBOS.set_event``), and blocks in
``DBOS.recv("approval", timeout_seconds=...)``. irq finds the wait in DBOS's own tables and
lists it in the inbox (kind ``message``); an operator's ``approve`` / ``reject`` / ``respond``
is the message. The workflow then places the order or drops it, and ends. The fleet starts the
next one a little later (console/demo/dbos/showcase.py).

Registered by every demo worker (console/demo/dbos/worker.py imports this module before
``DBOS.launch()``); started by the fleet through the ``irq-demo`` queue.
"""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOS

#: the topic the approver's message comes on
TOPIC = "approval"
#: a day to answer; then the order is dropped as unapproved
TIMEOUT_S = 24 * 3600


@DBOS.step()
def draft_order(request: str) -> dict[str, Any]:
    time.sleep(1)  # quotes from the cloud provider's capacity API
    return {"request": request, "vendor": "gpu-cloud.example", "nodes": 4,
            "gpu": "H100", "months": 3, "total_eur": 41_760}


@DBOS.step()
def place_order(order: dict[str, Any], approved: bool, note: str) -> str:
    time.sleep(1)
    if not approved:
        return f"order for {order['request']} dropped" + (f": {note}" if note else "")
    return f"order for {order['request']} placed with {order['vendor']}"


def _verdict(message: Any) -> tuple[bool, str]:
    """The approver's message: ``{"approved": true, "note": ...}``, or the approve / reject
    shape a console sends (``{"type": "approve"}``); anything else approves nothing."""
    if not isinstance(message, dict):
        return False, "no answer" if message is None else str(message)[:200]
    if "approved" in message:
        return message.get("approved") is True, str(message.get("note") or "")
    return message.get("type") == "approve", str(message.get("feedback") or "")


@DBOS.workflow()
def purchase_approval(request: str) -> dict[str, Any]:
    order = draft_order(request)
    DBOS.set_event("recv_topic", TOPIC)
    message = DBOS.recv(TOPIC, timeout_seconds=TIMEOUT_S)
    approved, note = _verdict(message)
    return {"order": order, "approved": approved, "outcome": place_order(order, approved, note)}
