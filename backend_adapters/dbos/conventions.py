"""The irq conventions on DBOS, shared by the console adapter and the agent helpers.

DBOS has no notion of interrupts, resources, heartbeats or pause (``docs/backends/dbos.md``).
irq layers them on two DBOS mechanisms, chosen by whether a value must be replay-safe:

- **Events** (``set_event``; journaled, replayed on recovery) for what the workflow's own logic
  decides: the pending interrupt, ``irq.interrupt``. The console reads it with
  ``get_event(id, key, timeout_seconds=0)``.
- **Workflow attributes** (``update_workflow_attributes(merge=True)``; a plain row update, never
  journaled, listed with the workflow at no extra query cost) for metadata that describes the
  current execution and must not add journal rows: the run declaration ``irq.run``, the step in
  flight ``irq.step``, the agent's last resource report ``irq.report``, and the console's intent
  ``irq.intent`` (pause / cancel / resume), which the agent reads to tell a pause from a cancel.

Interrupt ids are ``<workflow id>/<n>`` with ``n`` a per-execution counter that is deterministic
across replays. The same id is the ``send`` idempotency key (DBOS drops a repeated key, so one
decision per interrupt) and names the decision topic ``decision/<id>``.
"""

from __future__ import annotations

from typing import TypedDict

from backend_adapters.agent_resources import ResourceEntry
from backend_adapters.run_records import Phase

#: event: the pending interrupt (InterruptPayload) or None once decided
EVENT_INTERRUPT = "irq.interrupt"

#: attribute: RunDeclaration, written by the agent at the start of every execution
ATTR_RUN = "irq.run"
#: attribute: StepMarker, written from inside each step (no journal row)
ATTR_STEP = "irq.step"
#: attribute: AgentReport, the agent's last word on its resources and phase
ATTR_REPORT = "irq.report"
#: attribute: Intent, written by the console *before* it cancels or resumes
ATTR_INTENT = "irq.intent"
#: attribute: the id of the interrupt the agent is waiting on, or None (a hint that spares
#: the console a get_event per run; the event stays authoritative)
ATTR_WAITING = "irq.waiting"

DECISION_TOPIC_PREFIX = "decision/"

# ---- native waits: workflows that wait in DBOS.recv without irq's helpers (README.md,
# "Agents that don't use irq's helpers")

#: event a plain workflow may set to name the topic its recv waits on (DBOS records the
#: topic only once a message arrives): ``DBOS.set_event("recv_topic", "approval")``
EVENT_RECV_TOPIC = "recv_topic"
#: event a plain workflow may set to a JSON Schema of the message it expects; irq validates
#: the payload against it before it sends anything
EVENT_RECV_SCHEMA = "recv_schema"
#: native id of a message wait: ``recv:<the recv's DBOS function id>``
NATIVE_WAIT_PREFIX = "recv:"
#: idempotency keys of the messages irq sends to native waits: ``irq-message:<decision key>``
#: (DBOS stores ``<key>::<destination>`` as the message uuid, so irq's messages are known)
NATIVE_MESSAGE_KEY_PREFIX = "irq-message:"

#: DBOS statuses in which a workflow is (or is about to be) executing
ACTIVE_STATUSES = ("PENDING", "ENQUEUED", "DELAYED")

#: DBOS function names of its own operations, as they appear in list_workflow_steps
DBOS_OPERATIONS = frozenset(
    {
        "DBOS.setEvent",
        "DBOS.getEvent",
        "DBOS.recv",
        "DBOS.send",
        "DBOS.sleep",
        "DBOS.getResult",
        "DBOS.writeStream",
        "DBOS.closeStream",
        "DBOS.updateWorkflowAttributes",
        "DBOS.cancelWorkflow",
        "DBOS.getStatus",
    }
)


def native_message_key(decision_key: str) -> str:
    """The DBOS idempotency key of the message that carries the decision ``decision_key``."""
    return f"{NATIVE_MESSAGE_KEY_PREFIX}{decision_key}"


def decision_topic(interrupt_id: str) -> str:
    return f"{DECISION_TOPIC_PREFIX}{interrupt_id}"


def interrupt_id_for(workflow_id: str, n: int) -> str:
    return f"{workflow_id}/{n}"


class RunDeclaration(TypedDict, total=False):
    name: str
    interval_s: float
    timeout_s: float | None
    decision_poll_s: float
    resources: list[ResourceEntry]
    agent: str


class StepMarker(TypedDict, total=False):
    name: str
    function_id: int
    started_at_ms: int
    ended_at_ms: int | None
    failed: bool


class AgentReport(TypedDict, total=False):
    phase: Phase
    at: str
    pid: int
    resources: list[ResourceEntry]
    in_flight_step: str | None
    execution: int  # executions of the workflow under irq's helpers, this one included
    recoveries: int  # executions that replaced one which died without a final report


