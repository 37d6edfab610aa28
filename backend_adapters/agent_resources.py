"""How the agent-side helpers of every backend declare a resource to irq.

The DBOS and LangGraph helpers' ``AgentResource`` is :class:`AcquiredResource` (a resource
taken by ``acquire`` on every execution); ``restate/agent.py`` ``AgentResource`` (no
``acquire``, held from the start) and ``temporal/agent.py`` ``HeldResource`` (async hooks,
other field order) keep their own dataclasses. The entry they all send, in heartbeats and
reports, is built here, with the fields of ``console.model.Resource``. Standard library only:
this runs inside agent processes (and Temporal's workflow sandbox imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict

#: what a pause does to a resource: ``keep`` it held, ``release`` it, or ``snapshot`` it --
#: its state (a sandbox, a KV cache) is saved and the resource freed on pause (the helper
#: calls its ``release``, which saves), and restored on resume (``acquire`` runs again and
#: restores); plans count it as kept, ``irq drill`` times the restore
PausePolicy = Literal["keep", "release", "snapshot"]


class ResourceEntry(TypedDict, total=False):
    id: str
    kind: str
    on_pause: PausePolicy
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
    def on_pause(self) -> PausePolicy: ...
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


@dataclass
class AcquiredResource:
    """Something a run holds, with its pause/cancel policy and how to take and free it
    (``acquire`` and ``release`` must be idempotent: the code runs again after a pause)."""

    id: str
    kind: str = "resource"
    on_pause: PausePolicy = "keep"
    on_cancel: Literal["release", "keep"] = "release"
    detail: str = ""
    acquire: Callable[[], Any] | None = None
    release: Callable[[], Any] | None = None
    state: Literal["held", "released"] = field(default="released", init=False)

    def entry(self) -> ResourceEntry:
        return resource_entry(self)
