"""How the agent-side helpers of every backend declare a resource to irq.

Each backend's helper (``dbos/agent.py`` ``AgentResource``, ``langgraph/agent.py``
``AgentResource``, ``restate/agent.py`` ``AgentResource``, ``temporal/agent.py``
``HeldResource``) keeps its own dataclass (they differ in how a resource is taken and freed);
the entry they send, in heartbeats and reports, is built here, with the fields of
``console.model.Resource``. Standard library only: this runs inside agent processes (and
Temporal's workflow sandbox imports it).
"""

from __future__ import annotations

from typing import Literal, Protocol, TypedDict


class ResourceEntry(TypedDict, total=False):
    id: str
    kind: str
    on_pause: Literal["keep", "release"]
    on_cancel: Literal["release", "keep"]
    state: Literal["held", "released"]
    detail: str


class DeclaredResource(Protocol):
    """What a helper's resource type has (read-only here)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def on_pause(self) -> Literal["keep", "release"]: ...
    @property
    def on_cancel(self) -> Literal["release", "keep"]: ...
    @property
    def state(self) -> Literal["held", "released"]: ...
    @property
    def detail(self) -> str: ...


def resource_declaration(resource: DeclaredResource) -> ResourceEntry:
    """The resource's policies, without its state (what a run declares up front)."""
    return {
        "id": resource.id,
        "kind": resource.kind,
        "on_pause": resource.on_pause,
        "on_cancel": resource.on_cancel,
        "detail": resource.detail,
    }


def resource_entry(resource: DeclaredResource) -> ResourceEntry:
    """The resource with its state, as a heartbeat carries it (``Resource.contract()``)."""
    return {
        "id": resource.id,
        "kind": resource.kind,
        "on_pause": resource.on_pause,
        "on_cancel": resource.on_cancel,
        "state": resource.state,
        "detail": resource.detail,
    }
