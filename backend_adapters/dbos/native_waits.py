"""Pure mapping of a workflow blocked in ``DBOS.recv`` to an inbox item of kind ``message``.

No I/O: ``system_tables.py`` reads the wait (:class:`PendingRecv`), this module words it.

- **Id**: ``recv:<function id>`` — the recv's own DBOS function id, stable across polls and
  replays; a later recv of the same workflow is a new item.
- **Topic**: DBOS records none until a message arrives, so the item says so. The workflow may
  name it in the event ``recv_topic`` (then it is the item's one handler, kind ``topic``);
  else the operator gives it (``--topic``), or DBOS's default topic is used.
- **Deadline**: the recv's timeout, journaled as the wake-up time of its sleep row.
- **Decisions**: ``respond`` (the JSON response is the message, as is), ``approve`` and
  ``reject`` (the common decision payload ``{"type": ...}``, with ``feedback``). No ``edit``:
  a recv proposes no arguments to edit. When the workflow published a JSON Schema of the
  message (event ``recv_schema``), approve / reject are offered only if their payloads fit it.
- **A message irq sent that the recv has not taken** (after :data:`STALE_S`, while the
  workflow runs): it went to another topic than the one the recv waits on. The item then
  takes a new id (``recv:<fid>/unanswered-<n>``) whose description says so, so a gateway that
  recorded the first decision shows a pending item again rather than a decided one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from backend_adapters.dbos.conventions import (
    EVENT_RECV_SCHEMA,
    EVENT_RECV_TOPIC,
    NATIVE_WAIT_PREFIX,
)
from backend_adapters.dbos.system_tables import Message, PendingRecv
from console.decision_check import DecisionProblem, schema_validator
from console.model import Action, DecisionKind, Interrupt, InterruptHandler, InterruptKind

#: a message irq sent that a running recv has not taken after this long went to another
#: topic (a recv wakes within DBOS's notification polling interval, 1 s by default)
STALE_S = 5.0

NATIVE_DECISIONS = [DecisionKind.RESPOND, DecisionKind.APPROVE, DecisionKind.REJECT]


def is_helper_wait(wait: PendingRecv) -> bool:
    """The recv belongs to irq's own helper (its ``irq.interrupt`` event is set): that
    interrupt is the item, the recv under it is not listed again."""
    helper = wait.helper_interrupt
    return isinstance(helper, dict) and bool(helper.get("interrupt_id"))


def published_topic(wait: PendingRecv) -> str | None:
    topic = wait.published_topic
    return topic if isinstance(topic, str) and topic else None


def published_schema(wait: PendingRecv) -> dict[str, Any] | None:
    schema = wait.published_schema
    return schema if isinstance(schema, dict) else None


def allowed_decisions(wait: PendingRecv) -> list[DecisionKind]:
    """respond always; approve / reject when their common payloads fit the published schema."""
    schema = published_schema(wait)
    if schema is None:
        return list(NATIVE_DECISIONS)
    checked = schema_validator(schema)
    if isinstance(checked, DecisionProblem):
        return [DecisionKind.RESPOND]  # a broken schema: respond is refused when it is sent
    samples = {
        DecisionKind.APPROVE: {"type": "approve"},
        DecisionKind.REJECT: {"type": "reject", "feedback": "text"},
    }
    fits = [kind for kind, sample in samples.items() if checked.is_valid(sample)]
    return [DecisionKind.RESPOND, *fits]


def topic_label(topic: str | None) -> str:
    return f"topic {topic!r}" if topic is not None else "DBOS's default topic"


def unanswered(wait: PendingRecv, *, live: bool, now_s: float) -> list[Message]:
    """irq's messages the running recv has left untaken for longer than :data:`STALE_S`."""
    if not live:
        return []  # a paused run takes its messages when it resumes
    return [
        m
        for m in wait.unconsumed
        if m.sent_by_irq and now_s - m.created_at_ms / 1000 > STALE_S
    ]


def native_id_of(wait: PendingRecv, *, live: bool, now_s: float) -> str:
    base = f"{NATIVE_WAIT_PREFIX}{wait.recv_function_id}"
    stale = unanswered(wait, live=live, now_s=now_s)
    return f"{base}/unanswered-{len(stale)}" if stale else base


def recv_function_id(native_id: str) -> int | None:
    """The recv's function id in a message item's native id (None: not a message item)."""
    if not native_id.startswith(NATIVE_WAIT_PREFIX):
        return None
    head = native_id[len(NATIVE_WAIT_PREFIX) :].split("/", 1)[0]
    return int(head) if head.isdigit() else None


def wait_site(wait: PendingRecv) -> str:
    topic = published_topic(wait)
    where = f"DBOS.recv (function id {wait.recv_function_id})"
    if topic is None:
        return (
            f"{where} waiting (topic not recorded by DBOS until a message arrives); "
            "deadline from its timeout"
        )
    return (
        f"{where} waiting on {topic_label(topic)}, as the workflow's {EVENT_RECV_TOPIC} event "
        "says (DBOS records no topic until a message arrives); deadline from its timeout"
    )


def _description(wait: PendingRecv, stale: list[Message]) -> str:
    topic = published_topic(wait)
    lines = [
        "The workflow waits in DBOS.recv for a message. DBOS records no topic until a "
        "message arrives; the recv's timeout is its deadline.",
        "Answer: respond --json PAYLOAD sends the payload as is; approve / reject send "
        '{"type": "approve"} / {"type": "reject", "feedback": ...}. '
        + (
            f"Sent on {topic_label(topic)} (the workflow's {EVENT_RECV_TOPIC} event) unless "
            "--topic names another."
            if topic is not None
            else "--topic names the topic the recv waits on (DBOS's default topic without it)."
        ),
    ]
    if published_schema(wait) is not None:
        lines.append(f"The payload must fit the JSON Schema in the {EVENT_RECV_SCHEMA} event.")
    for m in stale:
        lines.append(
            f"irq's earlier message on {topic_label(m.topic)} (key "
            f"{m.message_uuid.split('::', 1)[0]}) has not been taken: the recv waits on "
            "another topic. It stays unconsumed in DBOS's notifications (a later recv on "
            "that topic would receive it); answer again with --topic naming the right one."
        )
    return "\n".join(lines)


def message_interrupt(
    wait: PendingRecv, *, run_id: str, workflow_name: str, live: bool, now_s: float
) -> Interrupt:
    """The inbox item for a pending recv (``live``: the workflow is running, not paused)."""
    stale = unanswered(wait, live=live, now_s=now_s)
    native = native_id_of(wait, live=live, now_s=now_s)
    topic = published_topic(wait)
    handlers = []
    if topic is not None:
        handlers.append(
            InterruptHandler(
                name=topic,
                kind="topic",
                description=f"the topic the workflow named in its {EVENT_RECV_TOPIC} event",
                args_schema=published_schema(wait),
            )
        )
    began = datetime.fromtimestamp(wait.started_at_ms / 1000, UTC) if wait.started_at_ms else None
    deadline = datetime.fromtimestamp(wait.wake_at_s, UTC) if wait.wake_at_s else None
    return Interrupt(
        id=Interrupt.make_id(run_id, native),
        run_id=run_id,
        native_id=native,
        title=f"{workflow_name or 'workflow'} waits for a message (DBOS.recv)",
        description=_description(wait, stale),
        action="DBOS.recv",
        allowed_decisions=allowed_decisions(wait),
        created_at=began or datetime.now(UTC),
        kind=InterruptKind.MESSAGE,
        handlers=handlers,
        deadline_at=deadline,
        wait_site=wait_site(wait),
    )


def wait_notes(wait: PendingRecv) -> dict[Action, list[str]]:
    """What pause and resume mean for a run parked in a recv (dbos.md §2, §4): nothing is
    in flight, so nothing re-runs; DBOS's cancel does not wake the parked thread."""
    deadline = (
        datetime.fromtimestamp(wait.wake_at_s, UTC).isoformat() if wait.wake_at_s else "none"
    )
    return {
        Action.PAUSE: [
            "the run waits in DBOS.recv: the cancel does not wake it; its thread stays parked "
            f"until the recv's timeout (deadline {deadline}). Nothing re-runs: a message sent "
            "meanwhile is kept and received after resume"
        ],
        Action.RESUME: [
            "the run was waiting in DBOS.recv: nothing re-runs on resume, the recv waits "
            "again until its journaled deadline"
        ],
    }
