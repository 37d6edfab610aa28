"""Reads of DBOS's system tables that ``DBOSClient`` has no public call for (dbos 3.4.0).

A workflow blocked in ``DBOS.recv(topic, timeout_seconds=T)`` leaves no row of its own and
records no topic until a message arrives (measured, dbos 3.4.0): the recv takes function id
``F`` and journals only the durable sleep that holds its timeout, as ``DBOS.sleep`` at
``F + 1`` (output = the wake-up time, epoch seconds), *before* it waits. So a pending recv is
"the workflow's newest ``operation_outputs`` row is a ``DBOS.sleep`` whose predecessor has no
row". (A ``DBOS.get_event`` of another workflow, waiting in workflow code, leaves the same
trace: it is listed as a message wait too.) A plain ``DBOS.sleep`` always has its predecessor
journaled, or is function id 1.

Finding that with the public API costs one ``list_workflow_steps`` per workflow per poll; at a
thousand waiting workflows that is a thousand queries a second. One SQL statement over the
primary key ``(workflow_uuid, function_id)`` finds them all, with the events irq reads beside
them (so a helper interrupt and its recv are seen in one consistent read). It uses DBOS's own
table definitions and engine (``client._sys_db``: private, pinned by ``dbos==3.4.0`` in
pyproject; the schema translation for PostgreSQL comes with the engine). Pool threads only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient
from dbos._schemas.system_database import SystemSchema
from dbos._serialization import deserialize_value

from backend_adapters.dbos.conventions import (
    EVENT_INTERRUPT,
    EVENT_RECV_SCHEMA,
    EVENT_RECV_TOPIC,
    NATIVE_MESSAGE_KEY_PREFIX,
)

#: workflow ids per statement (SQLite before 3.32 allows 999 bound parameters)
_CHUNK = 500


@dataclass(frozen=True)
class Message:
    """One row of DBOS's ``notifications`` table (a message sent to a workflow)."""

    topic: str | None  # None: DBOS's default topic
    message_uuid: str  # "<idempotency key>::<destination>" when sent with a key
    created_at_ms: int
    consumed: bool
    consumed_by_function_id: int | None

    @property
    def sent_by_irq(self) -> bool:
        return self.message_uuid.startswith(NATIVE_MESSAGE_KEY_PREFIX)


@dataclass(frozen=True)
class PendingRecv:
    """A workflow blocked in ``DBOS.recv`` (or a workflow-side ``get_event``: same trace)."""

    workflow_id: str
    recv_function_id: int  # the recv's own function id (its sleep row is the next one)
    started_at_ms: int  # when the wait began (its sleep row was journaled)
    wake_at_s: float | None  # the recv's timeout as a wake-up time (epoch seconds)
    helper_interrupt: Any = None  # the irq.interrupt event: set = irq's own helper waits
    published_topic: Any = None  # the recv_topic event, if the workflow set one
    published_schema: Any = None  # the recv_schema event, if the workflow set one
    unconsumed: list[Message] = field(default_factory=list)  # messages waiting for it


def _tables() -> type[SystemSchema]:
    return SystemSchema


def _engine(client: DBOSClient) -> sa.Engine:
    engine: sa.Engine = client._sys_db.engine  # private: see the module docstring
    return engine


def _value(client: DBOSClient, raw: str | None, serialization: str | None) -> Any:
    if raw is None:
        return None
    try:
        return deserialize_value(raw, serialization, client._sys_db.serializer)
    except Exception:  # a value this process cannot decode is not a convention value
        return None


def _chunks(ids: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _pending_statement(ids: list[str]) -> sa.Select[Any]:
    """The newest row of each workflow, when it is a DBOS.sleep whose predecessor has no
    row, with the three events irq reads beside the wait (one consistent read)."""
    ops = _tables().operation_outputs
    events = _tables().workflow_events
    newer = ops.alias("newer")
    before = ops.alias("before")
    helper = events.alias("helper")
    topic = events.alias("topic")
    schema = events.alias("schema")

    def event_join(alias: sa.FromClause, key: str) -> sa.ColumnElement[bool]:
        return sa.and_(alias.c.workflow_uuid == ops.c.workflow_uuid, alias.c.key == key)

    joined = (
        ops.outerjoin(helper, event_join(helper, EVENT_INTERRUPT))
        .outerjoin(topic, event_join(topic, EVENT_RECV_TOPIC))
        .outerjoin(schema, event_join(schema, EVENT_RECV_SCHEMA))
    )
    return (
        sa.select(
            ops.c.workflow_uuid,
            ops.c.function_id,
            ops.c.started_at_epoch_ms,
            ops.c.output,
            ops.c.serialization,
            helper.c.value,
            helper.c.serialization,
            topic.c.value,
            topic.c.serialization,
            schema.c.value,
            schema.c.serialization,
        )
        .select_from(joined)
        .where(
            ops.c.workflow_uuid.in_(ids),
            ops.c.function_name == "DBOS.sleep",
            ops.c.function_id >= 2,
            ~sa.exists().where(
                newer.c.workflow_uuid == ops.c.workflow_uuid,
                newer.c.function_id > ops.c.function_id,
            ),
            ~sa.exists().where(
                before.c.workflow_uuid == ops.c.workflow_uuid,
                before.c.function_id == ops.c.function_id - 1,
            ),
        )
    )


def pending_recvs(client: DBOSClient, workflow_ids: list[str]) -> dict[str, PendingRecv]:
    """The workflows among ``workflow_ids`` blocked in a recv, with the messages that wait
    for them unconsumed. One statement per 500 workflows, plus one for the messages of those
    found waiting."""
    found: dict[str, PendingRecv] = {}
    engine = _engine(client)
    with engine.connect() as conn:
        for chunk in _chunks(workflow_ids):
            for row in conn.execute(_pending_statement(chunk)):
                wake = _value(client, row[3], row[4])
                found[row[0]] = PendingRecv(
                    workflow_id=row[0],
                    recv_function_id=int(row[1]) - 1,
                    started_at_ms=int(row[2] or 0),
                    wake_at_s=float(wake) if isinstance(wake, int | float) else None,
                    helper_interrupt=_value(client, row[5], row[6]),
                    published_topic=_value(client, row[7], row[8]),
                    published_schema=_value(client, row[9], row[10]),
                )
        if found:
            for wid, messages in _unconsumed(conn, list(found)).items():
                found[wid].unconsumed.extend(messages)
    return found


def _message(row: Any) -> Message:
    return Message(
        topic=row.topic,
        message_uuid=str(row.message_uuid),
        created_at_ms=int(row.created_at_epoch_ms or 0),
        consumed=bool(row.consumed),
        consumed_by_function_id=row.consumed_by_function_id,
    )


def _unconsumed(conn: sa.Connection, workflow_ids: list[str]) -> dict[str, list[Message]]:
    notes = _tables().notifications
    out: dict[str, list[Message]] = {}
    for chunk in _chunks(workflow_ids):
        rows = conn.execute(
            sa.select(notes)
            .where(notes.c.destination_uuid.in_(chunk), notes.c.consumed == sa.false())
            .order_by(notes.c.created_at_epoch_ms)
        )
        for row in rows:
            out.setdefault(row.destination_uuid, []).append(_message(row))
    return out


def message(client: DBOSClient, message_uuid: str) -> Message | None:
    """One message by its uuid (``<idempotency key>::<destination>``), consumed or not."""
    notes = _tables().notifications
    with _engine(client).connect() as conn:
        row = conn.execute(sa.select(notes).where(notes.c.message_uuid == message_uuid)).first()
    return _message(row) if row is not None else None


def event_values(client: DBOSClient, workflow_ids: list[str], key: str) -> dict[str, Any]:
    """``get_event(id, key, timeout_seconds=0)`` for many workflows in one statement per 500
    (the public call is one or two statements per workflow: a thousand parked workflows made
    two thousand per poll). Workflows without the event are absent."""
    events = _tables().workflow_events
    out: dict[str, Any] = {}
    with _engine(client).connect() as conn:
        for chunk in _chunks(workflow_ids):
            rows = conn.execute(
                sa.select(events.c.workflow_uuid, events.c.value, events.c.serialization).where(
                    events.c.workflow_uuid.in_(chunk), events.c.key == key
                )
            )
            for wid, raw, serialization in rows:
                out[wid] = _value(client, raw, serialization)
    return out


def stepped_since_dispatch(client: DBOSClient, workflow_ids: list[str]) -> set[str]:
    """The workflows among ``workflow_ids`` that journaled an operation which started at or
    after their latest dispatch (``workflow_status.started_at_epoch_ms``, which DBOS sets in
    the same statement that adds 1 to ``recovery_attempts``): they made progress since they
    were last recovered. A replayed step writes no row, and the attributes irq's helpers write
    go through a DBOSClient and add none, so a row started after the dispatch is new work.
    One statement per 500 workflows, over the primary key."""
    ops = _tables().operation_outputs
    status = _tables().workflow_status
    found: set[str] = set()
    with _engine(client).connect() as conn:
        for chunk in _chunks(workflow_ids):
            rows = conn.execute(
                sa.select(ops.c.workflow_uuid)
                .join(status, status.c.workflow_uuid == ops.c.workflow_uuid)
                .where(
                    ops.c.workflow_uuid.in_(chunk),
                    status.c.started_at_epoch_ms.is_not(None),
                    ops.c.started_at_epoch_ms >= status.c.started_at_epoch_ms,
                )
                .distinct()
            )
            found.update(str(row[0]) for row in rows)
    return found
