"""Facts about a run's failures and its work, shared by adapters, plans and alerts.

``RunError`` (why a run failed or was given up), ``StepRetry`` (a step the engine keeps
retrying: the ``retrying`` alert) and ``WorkAtRisk`` (what an action throws away). They are
fields of :class:`console.model.Run` and :class:`console.model.ActionPlan`; JSON field names
are part of the scripting contract (add, never rename).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunError(BaseModel):
    """Why a run failed or was given up: the engine's error, the step it failed in, when."""

    model_config = ConfigDict(extra="ignore")

    type: str = ""  # the exception / failure type the engine recorded
    message: str = ""
    step: str | None = None  # the step (activity, DBOS step, journal entry, node) that failed
    at: datetime | None = None

    def contract(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "step": self.step,
            "at": self.at.isoformat() if self.at else None,
        }


class StepRetry(BaseModel):
    """A step the engine is retrying: the ``retrying`` alert's facts."""

    model_config = ConfigDict(extra="ignore")

    step: str
    attempt: int  # the attempt running or scheduled next (1 = first try)
    last_error: str = ""
    next_attempt_at: datetime | None = None

    def contract(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "attempt": self.attempt,
            "last_error": self.last_error,
            "next_attempt_at": self.next_attempt_at.isoformat() if self.next_attempt_at else None,
        }


class WorkAtRisk(BaseModel):
    """What an action throws away on one run: the time since its last journaled step times
    the resources it holds (DESIGN.md §1, "Work at risk")."""

    run_id: str
    minutes: float  # since the last journaled step (or the start, when none)
    gpu_minutes: float = 0.0
    cost: float | None = None  # money, when a price table is configured
    currency: str = ""
    snapshot: list[str] = Field(default_factory=list)  # resources saved on pause, restored
    gpus: float = 0.0  # GPU units held (gpu_minutes = minutes x gpus)
    since: datetime | None = None  # where ``minutes`` count from (last step, else start)
    counted_from: str = ""  # "last_step" | "start" | "" (neither known: minutes is 0)

    def contract(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "minutes": self.minutes,
            "gpu_minutes": self.gpu_minutes,
            "cost": self.cost,
            "currency": self.currency,
            "snapshot": list(self.snapshot),
            "gpus": self.gpus,
            "since": self.since.isoformat() if self.since else None,
            "counted_from": self.counted_from,
        }


class RetryPlan(BaseModel):
    """What a retry of one run will do on its backend (the adapter's answer; the gateway
    folds it into the :class:`console.model.ActionPlan` every retry shows and audits)."""

    model_config = ConfigDict(extra="ignore")

    from_step: str | None = None  # the first step that runs again (None: from the start)
    steps_kept: list[str] = Field(default_factory=list)  # journaled results reused
    will_rerun: list[str] = Field(default_factory=list)  # steps that execute again
    #: steps that run again whose side effects are not journaled: they happen twice
    unjournaled_effects: list[str] = Field(default_factory=list)
    operations: list[str] = Field(default_factory=list)  # the backend calls the retry makes
    warnings: list[str] = Field(default_factory=list)
    new_run: bool = False  # the retry creates a new run (fork / reset) rather than in place
    #: False when the backend can only restart from the last good step, not a chosen one
    any_step: bool = True


class RetryOutcome(BaseModel):
    """What a retry did: the run that now carries the work (a new id after a fork)."""

    model_config = ConfigDict(extra="ignore")

    detail: str
    operations: list[str] = Field(default_factory=list)
    new_native_id: str | None = None  # None: retried in place
