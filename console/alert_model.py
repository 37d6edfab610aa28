"""Alert kinds and the conditions that raise them (DESIGN.md §1 "Alert", §5 alert).

A :class:`Condition` is one observation that something needs a person although nothing is
silent: adapters report the backend-side ones in :class:`backend_adapters.base.Observation`
(``no_workers``, ``retrying``, ``given_up``); the gateway derives the others from its own
state (``stalled``, ``liveness_unknown``, ``interrupt_overdue``, ``obligation_overdue``,
``leak_suspected``, ``held_too_long``). The gateway's alert evaluator turns conditions that
hold for a grace period into durable alerts, and clears them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class AlertKind(StrEnum):
    NO_WORKERS = "no_workers"  # a task queue nobody polls, a queue with no live executor
    RETRYING = "retrying"  # a step failed N times in a row and is backing off
    GIVEN_UP = "given_up"  # the engine stopped retrying
    STALLED = "stalled"  # fresh heartbeats, no progress for a configured time
    LIVENESS_UNKNOWN = "liveness_unknown"  # the backend has not answered past its budget
    INTERRUPT_OVERDUE = "interrupt_overdue"
    OBLIGATION_OVERDUE = "obligation_overdue"
    LEAK_SUSPECTED = "leak_suspected"
    HELD_TOO_LONG = "held_too_long"  # a paused run holding a kept resource too long


@dataclass(frozen=True)
class Condition:
    """One condition as observed now. ``subject`` is what it is about: a run id, an
    interrupt id, an obligation id, or ``BACKEND:CONTEXT`` (for a whole backend); with
    ``kind`` it is the condition's identity (one alert per kind and subject)."""

    kind: AlertKind
    subject: str
    detail: str
    action: str = ""  # what to do, in operator words ("start a worker on queue q")
    run: str | None = None  # the run it concerns, when there is one
    backend: str = ""
    context: str = ""
    since: datetime | None = None  # when the condition began, when the source knows
    attempt: int | None = None  # retrying: the attempt count
    facts: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.kind.value}:{self.subject}"


AlertState = Literal["open", "acknowledged", "cleared"]
#: states of an alert that still needs a person (``irq alerts`` lists these by default)
ACTIVE: tuple[AlertState, ...] = ("open", "acknowledged")


class Alert(BaseModel):
    """One durable alert (the journal's ``alerts`` row; DESIGN.md §5 "alert"). ``kind`` is a
    plain string so a client reads the kinds of a newer gateway too."""

    model_config = ConfigDict(extra="ignore")

    id: str
    kind: str
    subject: str  # with ``kind``: the condition it was raised for
    run: str | None = None
    backend: str = ""
    context: str = ""
    since: datetime  # when the condition began (or was first seen)
    raised_at: datetime
    detail: str = ""
    action: str = ""  # what to do
    state: AlertState = "open"
    acked_by: str | None = None
    acked_at: datetime | None = None
    ack_reason: str = ""
    silenced_until: datetime | None = None
    silenced_by: str | None = None
    cleared_at: datetime | None = None
    attempt: int | None = None  # retrying: the attempt count
    facts: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.subject}"

    def silenced(self, now: datetime) -> bool:
        return self.silenced_until is not None and self.silenced_until > now

    def contract(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
