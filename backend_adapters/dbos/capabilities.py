"""What irq's actions mean on DBOS, in operator words (shown in plans and `irq show`)."""

from __future__ import annotations

from backend_adapters.base import ActionCapability, Capabilities
from console.model import Action, DecisionKind

DBOS_CAPABILITIES = Capabilities(
    backend="dbos",
    actions={
        Action.PAUSE: ActionCapability(
            supported=True,
            native=False,
            meaning=(
                "cancel_workflow + console record (ledger and irq.intent=pause): DBOS "
                "marks the run CANCELLED at once; the agent notices at its next DBOS "
                "call (a running step finishes first, its result is discarded and it "
                "re-runs on resume); the agent releases on_pause=release resources "
                "and keeps the rest"
            ),
            operations=(
                "update_workflow_attributes(irq.intent=pause)",
                "cancel_workflow",
            ),
        ),
        Action.RESUME: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "resume_workflow: re-queued, then continues from the last journaled "
                "step (journaled steps replay, the in-flight step runs again). Allowed "
                "on paused (CANCELLED) and MAX_RECOVERY_ATTEMPTS_EXCEEDED runs, and on "
                "a PENDING run only when it is lost (forced restart: if its executor "
                "is in fact alive the current step runs twice)"
            ),
            operations=(
                "update_workflow_attributes(irq.intent=resume)",
                "resume_workflow",
            ),
        ),
        Action.CANCEL: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "cancel_workflow with irq.intent=cancel: terminal for irq; the agent "
                "releases every resource not marked on_cancel=keep. A paused run is "
                "resumed once for cleanup so the agent can release what it kept"
            ),
            operations=(
                "update_workflow_attributes(irq.intent=cancel)",
                "cancel_workflow",
            ),
        ),
        Action.TERMINATE: ActionCapability(
            supported=False,
            native=False,
            meaning=(
                "DBOS has no kill: cancel_workflow is cooperative (a running step "
                "completes). Use cancel; to stop the code now, stop the agent process"
            ),
        ),
        Action.RETRY: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "fork_workflow from a step (default: the failed one): a new run (new id, "
                "forked_from) that reuses the recorded results of the steps before it; the "
                "workflow function runs again from the top, so code outside steps runs "
                "again. A run DBOS gave up on (MAX_RECOVERY_ATTEMPTS_EXCEEDED) is resumed "
                "in place (resume_workflow) unless a step is chosen. resume_workflow does "
                "nothing for ERROR runs, hence the fork"
            ),
            operations=(
                "update_workflow_attributes(irq.intent=retry)",
                "fork_workflow(start_step) | resume_workflow (given up)",
            ),
        ),
    },
    decisions=tuple(DecisionKind),
    native_heartbeats=False,
    notes=(
        "no native heartbeats: instrumented agents push them to the gateway",
        "pause and cancel are both DBOS CANCELLED; irq tells them apart by its "
        "ledger and the irq.intent workflow attribute",
        "a SIGKILLed agent's runs stay PENDING until an executor with the same "
        "executor id and application version restarts (then recovery_attempts>1)",
    ),
)
