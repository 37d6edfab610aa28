"""What a DBOS workflow's own system database says it received: the evidence for exactly-once.

DBOS keeps every message sent to a workflow in its ``notifications`` table (``consumed`` once a
``recv`` took it) and journals each ``recv`` as a step of the workflow (``operation_outputs``:
its output is the message received, or nothing when the poll timed out). A test that wants to
know that a decision reached an agent exactly once waits for the workflow to *settle* (a
terminal status, or a given step journaled after the decision) and then reads both: a late
duplicate shows up as a second message, consumed or not, instead of hiding behind a fixed
sleep that happened to be too short.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TERMINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


@dataclass(frozen=True)
class WorkflowRecord:
    status: str | None  # DBOS workflow status, None before the workflow exists
    sent: list[dict[str, Any]]  # every message sent to the workflow: topic, message, consumed
    received: list[Any]  # messages the workflow's recv steps returned, in journal order
    steps: list[str]  # names of the journaled steps, in order
    #: (index in ``steps``, message) for each recv that returned a message
    recv_at: list[tuple[int, Any]] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        return self.status in TERMINAL

    def sent_on(self, topic: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["topic"] == topic]

    def decision_for(self, interrupt_native_id: str) -> Any | None:
        """The decision message the workflow received for this interrupt, once it has journaled
        a step after that ``recv`` (it went on with the decision), else None."""
        for index, message in self.recv_at:
            if isinstance(message, dict) and message.get("interrupt_id") == interrupt_native_id:
                return message if index < len(self.steps) - 1 or self.settled else None
        return None


def _decode(raw: str | None, serialization: str | None) -> Any:
    """Decode a stored value the way DBOS itself does (pickle+base64 or portable JSON)."""
    from dbos._serialization import DefaultSerializer, deserialize_value

    return deserialize_value(raw, serialization, DefaultSerializer())


def read_record(db: Path, wid: str) -> WorkflowRecord:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        row = conn.execute(
            "SELECT status FROM workflow_status WHERE workflow_uuid = ?", (wid,)
        ).fetchone()
        cols = {c[1] for c in conn.execute("PRAGMA table_info(notifications)")}
        ser = "serialization" if "serialization" in cols else "NULL"
        sent = [
            {"topic": topic, "message": _decode(message, s), "consumed": bool(consumed)}
            for topic, message, s, consumed in conn.execute(
                f"SELECT topic, message, {ser}, consumed FROM notifications "
                "WHERE destination_uuid = ? ORDER BY created_at_epoch_ms",
                (wid,),
            )
        ]
        ocols = {c[1] for c in conn.execute("PRAGMA table_info(operation_outputs)")}
        oser = "serialization" if "serialization" in ocols else "NULL"
        steps: list[str] = []
        recv_at: list[tuple[int, Any]] = []
        for name, output, s in conn.execute(
            f"SELECT function_name, output, {oser} FROM operation_outputs "
            "WHERE workflow_uuid = ? ORDER BY function_id",
            (wid,),
        ):
            if name == "DBOS.recv":
                value = _decode(output, s)
                if value is not None:
                    recv_at.append((len(steps), value))
            steps.append(name)
    return WorkflowRecord(
        row[0] if row else None, sent, [m for _, m in recv_at], steps, recv_at
    )


async def settled_record(
    db: Path, wid: str, *, step: str | None = None, timeout_s: float = 60.0
) -> WorkflowRecord:
    """Wait until the workflow is terminal (or, with ``step``, has journaled a step whose name
    contains it), then return its record."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = await asyncio.to_thread(read_record, db, wid)
        if record.settled or (step is not None and any(step in s for s in record.steps)):
            return record
        if time.monotonic() > deadline:
            raise AssertionError(f"{wid} did not settle in {timeout_s}s: {record}")
        await asyncio.sleep(0.2)


async def decision_received(
    db: Path, wid: str, interrupt_native_id: str, *, timeout_s: float = 60.0
) -> tuple[Any, WorkflowRecord]:
    """Wait until the workflow has received the decision for this interrupt and gone on past
    it; returns that message (as the agent got it) and the record read at that moment."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = await asyncio.to_thread(read_record, db, wid)
        message = record.decision_for(interrupt_native_id)
        if message is not None:
            return message, record
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{wid} never went on past a decision for {interrupt_native_id}: {record}"
            )
        await asyncio.sleep(0.2)
