"""Wire frames of a forced release through the agent channel (PROTOCOL.md, "Forced release").

The gateway sends the agent a ``release`` frame (``id``, ``backend``, ``context``,
``native_id``, ``resource``, ``kind``, ``reason``); the agent's helper hands it to the release
callback it registered for that resource id or kind
(``backend_adapters.release_callbacks.on_release``) and answers ``release_result``: ``id``,
``outcome`` (``released``: the callback returned; ``failed``: it raised; ``no_callback``: none
registered; ``unknown_run``: this process never reported the run), ``detail``. The agent
pushes the run's next beat, with the resource released, before its answer.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ReleaseAnswer = Literal["released", "failed", "no_callback", "unknown_run"]


class ReleaseResult(BaseModel):
    """The agent's answer to a ``release`` frame."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["release_result"]
    id: str = Field(min_length=1, max_length=128)
    outcome: ReleaseAnswer
    detail: str = Field(default="", max_length=2000)


def release_request_frame(request_id: str, run_id: str, resource: str, kind: str,
                          reason: str) -> dict[str, Any]:
    """The ``release`` frame for one resource of ``run_id`` (``BACKEND:CONTEXT/NATIVE_ID``)."""
    key, _, native = run_id.partition("/")
    backend, _, context = key.partition(":")
    return {"type": "release", "id": request_id, "backend": backend, "context": context,
            "native_id": native, "resource": resource, "kind": kind, "reason": reason}
