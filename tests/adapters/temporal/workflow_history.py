"""What a workflow's own history (the Temporal server's record, read over its HTTP API) says
was delivered to it: the evidence for "nothing reached it" and "it got it exactly once"."""

from __future__ import annotations

from typing import Any

import httpx

from backend_adapters.temporal.dev_server import DevServer

ACCEPTED = "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED"
SIGNALED = "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"


def history(server: DevServer, workflow_id: str) -> list[dict[str, Any]]:
    """Every event of the workflow's latest run, in order (all pages)."""
    events: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"nextPageToken": token} if token else {}
        r = httpx.get(
            f"{server.http_url}/api/v1/namespaces/default/workflows/{workflow_id}/history",
            params=params, timeout=25.0)
        r.raise_for_status()
        body = r.json()
        events += (body.get("history") or {}).get("events") or []
        token = body.get("nextPageToken") or ""
        if not token:
            return events


def accepted_updates(server: DevServer, workflow_id: str,
                     name: str = "irq_decide") -> list[dict[str, Any]]:
    """The accepted requests of update ``name`` (its ``meta``, with the update id, and its
    ``input``), in the order the workflow accepted them."""
    out = []
    for event in history(server, workflow_id):
        if event.get("eventType") != ACCEPTED:
            continue
        request = event["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]
        if request.get("input", {}).get("name") == name:
            out.append(request)
    return out


def signals(server: DevServer, workflow_id: str) -> list[str]:
    """The names of the signals the workflow received."""
    return [e["workflowExecutionSignaledEventAttributes"]["signalName"]
            for e in history(server, workflow_id) if e.get("eventType") == SIGNALED]
