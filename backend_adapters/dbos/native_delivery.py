"""Answering a workflow's own ``DBOS.recv``: the operator's payload sent once, on a topic.

- The one decision check first (``console/decision_check.py``: ``respond`` needs a response,
  ``reject`` feedback, ``edit`` is not offered), then the payload: plain JSON, and valid
  against the JSON Schema the workflow published in its ``recv_schema`` event, if any.
  Anything refused sends nothing.
- The message: ``respond`` sends the response as is; ``approve`` / ``reject`` the common
  decision payload (``console.decision_check.native_payload``).
- The topic: ``Decision.topic``, else the workflow's ``recv_topic`` event, else DBOS's
  default topic. DBOS cannot say which topic a recv waits on, so a message on another topic
  waits unconsumed in ``notifications``; the item says so on a later poll (native_waits.py).
- Once: the DBOS idempotency key is ``irq-message:<decision key>``, so a re-driven decision
  is dropped by DBOS; before sending, the message is looked up by that key in DBOS's
  ``notifications`` table and, if there, reported (taken by the recv, or waiting) and not
  sent again. A second decision while irq's first message on the same topic still waits is
  a ``Conflict``: a recv takes one message, the other would answer a later recv.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import exceptions

from backend_adapters.base import ActionOutcome, Conflict, InvalidInput
from backend_adapters.dbos.conventions import ACTIVE_STATUSES, native_message_key
from backend_adapters.dbos.mapping import paused_by_irq
from backend_adapters.dbos.native_waits import (
    is_helper_wait,
    published_schema,
    published_topic,
    recv_function_id,
    topic_label,
)
from backend_adapters.dbos.system_database import SystemDatabase
from backend_adapters.dbos.system_tables import PendingRecv, message, pending_recvs
from console.decision_check import (
    DecisionProblem,
    check_decision,
    json_path,
    native_payload,
    schema_validator,
)
from console.model import Decision, Interrupt, split_run_id


class NativeMessageDelivery:
    """Sends operators' answers to workflows waiting in their own ``DBOS.recv``."""

    def __init__(self, database: SystemDatabase) -> None:
        self._database = database

    async def decide(
        self,
        interrupt: Interrupt,
        decision: Decision,
        *,
        idempotency_key: str,
        ledger_paused: bool,
    ) -> ActionOutcome:
        problem = check_decision(interrupt, decision)
        if problem is not None:
            raise InvalidInput(f"decision refused: {problem}", target=interrupt.id)
        payload = native_payload(decision)
        try:
            json.dumps(payload)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"decision refused: payload: not plain JSON ({exc})", target=interrupt.id
            ) from exc
        detail = await self._database.call(
            self._send_sync, interrupt, decision, payload, idempotency_key, ledger_paused
        )
        return ActionOutcome(detail=detail, operations=["send"])

    def _send_sync(
        self,
        interrupt: Interrupt,
        decision: Decision,
        payload: Any,
        decision_key: str,
        ledger_paused: bool,
    ) -> str:
        client = self._database.connected()
        _, _, wid = split_run_id(interrupt.run_id)
        key = native_message_key(decision_key)
        earlier = message(client, f"{key}::{wid}")
        if earlier is not None:  # a re-driven decision: DBOS would drop it; say where it is
            where = (
                f"taken by the recv at function id {earlier.consumed_by_function_id}"
                if earlier.consumed
                else "waiting unconsumed in DBOS's notifications"
            )
            return (
                f"already sent on {topic_label(earlier.topic)} (idempotency key {key}): "
                f"{where}; not sent again"
            )
        status = self._database.status(wid)
        native = str(status.status)
        if native not in ACTIVE_STATUSES and not paused_by_irq(status, ledger_paused):
            raise Conflict(
                f"{interrupt.id}: the run is {native}: nothing waits for the message; "
                "nothing was sent",
                target=interrupt.id,
            )
        wait = pending_recvs(client, [wid]).get(wid)
        fid = recv_function_id(interrupt.native_id)
        if wait is None or is_helper_wait(wait) or wait.recv_function_id != fid:
            now = (
                f"it now waits in the recv at function id {wait.recv_function_id}"
                if wait is not None and not is_helper_wait(wait)
                else "it no longer waits in that recv"
            )
            raise Conflict(
                f"{interrupt.id}: the wait this decision answers has ended ({now}); "
                "nothing was sent",
                target=interrupt.id,
            )
        _refuse_against_schema(interrupt, wait, payload)
        topic = decision.topic if decision.topic is not None else published_topic(wait)
        waiting = [m for m in wait.unconsumed if m.sent_by_irq and m.topic == topic]
        if waiting:
            raise Conflict(
                f"{interrupt.id}: irq's message on {topic_label(topic)} (key "
                f"{waiting[0].message_uuid.split('::', 1)[0]}) has not been taken yet; a "
                "second one would answer a later recv. Nothing was sent",
                target=interrupt.id,
            )
        client.send(wid, payload, topic, key)
        chosen = "chosen by the operator" if decision.topic is not None else (
            "the workflow's recv_topic event" if topic is not None else "no --topic given"
        )
        paused = " (the run is paused: it takes the message when resumed)" if (
            native == "CANCELLED"
        ) else ""
        return (
            f"sent {decision.kind.value} to {wid} on {topic_label(topic)} ({chosen}; DBOS "
            f"idempotency key {key}){paused}. DBOS does not record the topic a recv waits on: "
            "if the item stays open, the recv waits on another topic and the message waits "
            "unconsumed in DBOS's notifications"
        )


def _refuse_against_schema(interrupt: Interrupt, wait: PendingRecv, payload: Any) -> None:
    """The payload must fit the JSON Schema the workflow published (``recv_schema``)."""
    schema = published_schema(wait)
    if schema is None:
        return
    checked = schema_validator(schema)
    if isinstance(checked, DecisionProblem):
        raise InvalidInput(
            f"decision refused: the workflow's recv_schema event: {checked}",
            target=interrupt.id,
        )
    error = exceptions.best_match(checked.iter_errors(payload))
    if error is not None:
        raise InvalidInput(
            f"decision refused: {json_path('payload', error.absolute_path)}: {error.message} "
            "(the workflow's recv_schema event); nothing was sent",
            target=interrupt.id,
        )
