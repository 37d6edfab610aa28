"""What irq's actions mean on Restate (docs/backends/restate.md §3)."""

from __future__ import annotations

from types import MappingProxyType

from backend_adapters.base import ActionCapability, Capabilities
from console.model import Action, RunState

RESTATE_CAPABILITIES = Capabilities(
    backend="restate",
    actions={
        Action.PAUSE: ActionCapability(
            True,
            "Restate pauses the invocation once the ctx.run in flight returns; its journal "
            "and pinned deployment are kept. A suspended invocation (nothing runs) cannot be "
            "paused.",
            ("PATCH /invocations/{id}/pause",),
        ),
        Action.RESUME: ActionCapability(
            True,
            "retry now: a paused or backing-off invocation runs at once; completed ctx.run "
            "steps are replayed from the journal, the one in flight runs again",
            ("PATCH /invocations/{id}/resume",),
        ),
        Action.CANCEL: ActionCapability(
            True,
            "graceful: the handler gets TerminalError('cancelled') at its current await and "
            "can release what it holds; a running ctx.run body is not stopped. On a "
            "backing-off invocation the cancel waits for the next retry, so irq resumes it "
            "right after.",
            ("PATCH /invocations/{id}/cancel",),
            operations_when=MappingProxyType(
                {
                    RunState.BACKING_OFF: (
                        "PATCH /invocations/{id}/cancel",
                        "PATCH /invocations/{id}/resume",
                    )
                }
            ),
        ),
        Action.TERMINATE: ActionCapability(
            True,
            "kill: completed as killed at once, no cleanup code runs, a running side effect "
            "is not stopped, resources marked release are at risk",
            ("PATCH /invocations/{id}/kill",),
        ),
        Action.DECIDE: ActionCapability(
            True,
            "resolves the interrupt's awakeable on the ingress with irq's decision payload "
            "(reject: rejects it with the feedback); irq checks the journal first (Restate "
            "accepts a second resolve silently). Works on irq's helper interrupts and on "
            "native waits with no irq code: a plain awakeable (kind awakeable) and a "
            "workflow's durable promise (kind promise), answered through the shared handler "
            "the operator picks, called with an idempotency key derived from the decision's",
            ("POST /restate/awakeables/{awakeable_id}/resolve",),
        ),
        Action.RETRY: ActionCapability(
            True,
            "an invocation Restate gave up on (paused after its retry policy ran out) is "
            "resumed in place: the journaled ctx.run results are replayed and the failing "
            "one runs again. A failed, cancelled or killed one (or a given-up one retried "
            "from another step: killed first) is restarted as a new invocation from any "
            "journal entry: the ctx.run results before it are copied, the rest runs again. "
            "Code outside ctx.run is not journaled and runs again. Needs the journal: "
            "Restate keeps it for journal_retention (1 day by default); workflows cannot be "
            "restarted as new in 1.7",
            ("PATCH /invocations/{id}/restart-as-new?from={entry}",),
            operations_when=MappingProxyType(
                {RunState.GIVEN_UP: ("PATCH /invocations/{id}/resume",)}
            ),
        ),
    },
    native_heartbeats=False,
    notes=(
        "Restate sees a crash in milliseconds but a hang only after the service's inactivity "
        "+ abort timeouts (11 min by default); handlers using backend_adapters.restate.agent "
        "push heartbeats to irq, which flags them late within seconds",
        "interrupts: a ctx.run named 'irq:interrupt' publishes {awakeable_id, title, args, "
        "args_schema, allowed_decisions} (backend_adapters/restate/README.md)",
        "native waits (no irq code): an awakeable whose id a ctx.run result holds is an "
        "inbox item as soon as that result is journaled, one handed out otherwise only once "
        "Restate suspends the invocation (inactivity timeout, 1 min by default); a workflow "
        "awaiting ctx.promise(name) is one at once; answered with POST "
        "/restate/awakeables/{id}/resolve|reject or POST /{workflow}/{key}/{shared handler}",
    ),
)
