"""The names irq uses on a LangGraph Agent Server, shared by the adapter and the agent helpers.

LangGraph has interrupts (``interrupt()``) and durable checkpoints natively; irq adds only
what it lacks (``docs/backends/langgraph.md``):

- **Thread metadata** (``PATCH /threads/{tid}``, merged): ``irq_intent`` =
  ``{action: pause|cancel|resume|retry, by, reason, at}``, written by the console *before* it stops
  or continues a thread. A cancelled run leaves its thread ``interrupted`` exactly like a
  pause does (``error: UserInterrupt``, no interrupts), so the intent is what tells them apart.
- **Run metadata** of every resume irq sends: ``irq_command_id`` (the idempotency key),
  ``irq_interrupt_id``, ``irq_decision`` (the kind), ``irq_by``. The run keeps them, so a
  decision re-driven after a gateway crash finds its own run and is not sent twice.
- **Run metadata** of every retry irq sends (a fork from a checkpoint): ``irq_retry_id`` (the
  command's idempotency key) and ``irq_by``: a repeated retry finds its run and sends nothing.
- **Thread metadata** ``irq_breakpoint`` = ``{checkpoint, command, decision, by, feedback}``,
  written before irq edits or ends a thread stopped at a static breakpoint (an edit, a
  reject): the state update leaves no run to carry the command id, so this record is how a
  re-driven decision knows it already acted on that checkpoint.
- **Interrupt values**: the two HITL shapes as they are (Agent Inbox ``HumanInterrupt``,
  langchain's ``HumanInTheLoopMiddleware`` request), plus one optional key irq reads in either:
  ``args_schema`` (a JSON Schema for edited arguments; Agent Inbox ignores unknown keys; the
  middleware's ``review_configs[i].args_schema`` is read too).
"""

from __future__ import annotations

from backend_adapters import run_records

BACKEND = "langgraph"

#: thread metadata: the console's last action on the thread (Intent)
META_INTENT = "irq_intent"
#: run metadata of a resume irq sent
META_COMMAND = "irq_command_id"
META_INTERRUPT = "irq_interrupt_id"
META_DECISION = "irq_decision"
META_BY = "irq_by"
#: run metadata of a retry irq sent (a fork from a checkpoint): the command's idempotency key
META_RETRY = "irq_retry_id"
#: thread metadata: the breakpoint decision irq is applying (edit / reject)
META_BREAKPOINT = "irq_breakpoint"

#: extra key of an interrupt value: JSON Schema of the edited arguments
KEY_ARGS_SCHEMA = "args_schema"

#: thread statuses of the Agent Server
THREAD_STATUSES = ("idle", "busy", "interrupted", "error")

#: the error a cancel with action=interrupt leaves on the thread
CANCEL_ERROR = "UserInterrupt"


class Intent(run_records.Intent, total=False):
    run_id: str  # the Agent Server run the action stopped (pause / cancel of a busy thread)
