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
from typing import Any


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
