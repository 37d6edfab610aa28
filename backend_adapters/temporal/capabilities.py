"""What each action means on Temporal, in operator words, and the calls it makes."""

from __future__ import annotations

from types import MappingProxyType

from backend_adapters.base import ActionCapability, Capabilities
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.conventions import MEMO_KEY, SEARCH_ATTRIBUTE, UPDATE_NAME
from backend_adapters.temporal.state_mapping import BACKEND
from console.model import Action, RunState


def temporal_capabilities(config: TemporalConfig) -> Capabilities:
    base = "/api/v1/namespaces/{ns}/workflows/{wid}"
    return Capabilities(
        backend=BACKEND,
        native_heartbeats=True,
        actions={
            Action.PAUSE: ActionCapability(
                True,
                "pause every pending activity of the workflow: the running attempt stops at "
                "its next heartbeat (it fails with ActivityPause, no retry is consumed), "
                "resources marked on_pause=release are released, the rest stay held; the "
                "workflow itself keeps running (timers, signals, updates). A workflow waiting "
                "for a person (nothing pending) has nothing to pause: the outcome says so, "
                "nothing is sent, and the wait stays open",
                (f"POST {base}/activities/{{aid}}/pause (each pending activity)",),
            ),
            Action.RESUME: ActionCapability(
                True,
                "unpause the paused activities: the next attempt starts at once and "
                "continues from the last heartbeat details. On a lost run (its worker "
                "went silent): an activity waiting for its retry is reset (retried now "
                "as attempt 1 from the last heartbeat details); one the server still "
                "counts as running is retried at its heartbeat timeout; either way the "
                "attempt starts when a worker polls the task queue",
                (f"POST {base}/activities/{{aid}}/unpause (each paused activity)",),
                operations_when=MappingProxyType(
                    {
                        RunState.LOST: (
                            f"POST {base}/activities/{{aid}}/reset (each activity waiting "
                            "for a retry after its heartbeat timeout: retried now as attempt "
                            "1 from its last heartbeat details, once a worker polls)",
                        ),
                    }
                ),
            ),
            Action.CANCEL: ActionCapability(
                True,
                "request workflow cancellation: graceful, the workflow code decides; a "
                "running activity sees it on its next heartbeat and releases resources "
                "marked on_cancel=release",
                (f"POST {base}/cancel",),
            ),
            Action.TERMINATE: ActionCapability(
                True,
                "terminate the workflow at once: no workflow or activity code runs "
                "again, held resources may leak",
                (f"POST {base}/terminate",),
            ),
            Action.RETRY: ActionCapability(
                True,
                "reset the workflow to the workflow task before the step it failed in (or "
                "a chosen activity, by journal index or name): a new run of the same "
                "workflow id replays the history before it, so activities completed before "
                "keep their results and do not run again; the activities from there on run "
                "again (side effects they had happen again unless idempotent); signals after "
                "the point are applied again. The command's key is the reset's request id "
                "and is kept in the new run's history: a repeated retry does nothing. A "
                "running workflow is refused (cancel or terminate it first). An activity a "
                "workflow rule paused (given up) is reset and unpaused in place",
                (f"POST {base}/reset (workflowTaskFinishEventId, requestId, reapply signals)",),
                operations_when=MappingProxyType(
                    {
                        RunState.GIVEN_UP: (
                            f"POST {base}/activities/{{aid}}/reset (each activity a workflow "
                            "rule paused; keepPaused=false: attempt 1, unpaused)",
                        ),
                    }
                ),
            ),
            Action.DECIDE: ActionCapability(
                True,
                f"workflow update '{UPDATE_NAME}' (validated by the workflow; updateId = "
                "the command's idempotency key, so a resend never applies twice); a native "
                "wait (kind signal / update): the chosen handler's signal, with a requestId "
                "derived from the key (recorded once), or its update with updateId = the key "
                "(the workflow's validator may refuse it: the wait stays open)",
                (
                    f"POST {base}/update/{UPDATE_NAME}",
                    f"POST {base}/signal/{{handler}} (native wait, kind signal)",
                    f"POST {base}/update/{{handler}} (native wait, kind update)",
                ),
            ),
        },
        notes=(
            "heartbeats are the server's record of pending activities (describe), read "
            f"within a budget of {config.rps:g} requests/s",
            f"waiting runs carry the search attribute {SEARCH_ATTRIBUTE} and memo "
            f"'{MEMO_KEY}' (irq's workflow helper sets them)",
            "activities without a heartbeat timeout cannot be paused or cancelled promptly",
        ),
    )
