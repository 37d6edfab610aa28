"""What irq's actions mean on a LangGraph Agent Server, in operator words (plans, ``irq show``)."""

from __future__ import annotations

from backend_adapters.base import ActionCapability, Capabilities
from console.model import Action, DecisionKind

LANGGRAPH_CAPABILITIES = Capabilities(
    backend="langgraph",
    actions={
        Action.PAUSE: ActionCapability(
            supported=True,
            native=False,
            meaning=(
                "no native pause: irq records irq_intent=pause on the thread and cancels its "
                "run with action=interrupt, which keeps the checkpoints (resumable). An async "
                "node stops at its next await; a synchronous node keeps running until it "
                "returns and its writes are discarded. A thread parked at an interrupt runs "
                "nothing and cannot be paused (decide or cancel it)"
            ),
            operations=(
                "PATCH /threads/{tid} (metadata irq_intent=pause)",
                "POST /threads/{tid}/runs/{rid}/cancel?action=interrupt",
            ),
        ),
        Action.RESUME: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "a new run on the thread with input null: it continues from the last "
                "checkpoint; the node that was in flight at the pause runs again from its "
                "start (nodes before it are not re-run)"
            ),
            operations=(
                "PATCH /threads/{tid} (metadata irq_intent=resume)",
                'POST /threads/{tid}/runs {"input": null, "multitask_strategy": "reject"}',
            ),
        ),
        Action.CANCEL: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "terminal for irq (irq_intent=cancel): a running run is cancelled with "
                "action=interrupt (checkpoints kept for the audit; a synchronous node keeps "
                "running until it returns); a pending interrupt is resolved without a "
                "decision (state updated as __end__); the thread leaves the inbox"
            ),
            operations=(
                "PATCH /threads/{tid} (metadata irq_intent=cancel)",
                "POST /threads/{tid}/runs/{rid}/cancel?action=interrupt",
                'POST /threads/{tid}/state {"values": null, "as_node": "__end__"} (waiting)',
            ),
        ),
        Action.RETRY: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "fork from a checkpoint (time travel): a new run on the same thread from the "
                "checkpoint before the failed node (default) or before a chosen node / at a "
                "journal step; nodes before it keep their results, it and the nodes after it "
                "run again. LangGraph journals results, not side effects: every re-run node's "
                "calls happen again. Refused while the thread runs or waits for a decision"
            ),
            operations=(
                "POST /threads/{tid}/history (the checkpoints)",
                "PATCH /threads/{tid} (metadata irq_intent=retry)",
                'POST /threads/{tid}/runs {"checkpoint_id", "input": null, '
                '"multitask_strategy": "reject", "metadata": {"irq_retry_id": KEY}}',
            ),
        ),
        Action.TERMINATE: ActionCapability(
            supported=False,
            native=False,
            meaning=(
                "the Agent Server has no kill: a cancel cannot stop a synchronous node. "
                "Use cancel; to stop the code now, restart the server"
            ),
        ),
    },
    decisions=tuple(DecisionKind),
    native_heartbeats=False,
    notes=(
        "no run heartbeats on the Agent Server: agents that use irq's helper push them "
        "(backend_adapters/langgraph/agent.py); other runs show liveness unknown",
        "a run is a thread; waiting = thread interrupted WITH pending interrupts (a cancelled "
        "run also leaves the thread interrupted, with none)",
        "decisions resume by interrupt id with multitask_strategy=reject: a second concurrent "
        "resume is refused (conflict)",
        "the in-memory runtime of langgraph dev keeps threads in the server process (pickled "
        "on shutdown): a crash loses them",
    ),
)
