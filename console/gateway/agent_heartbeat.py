"""The ``heartbeat`` an agent pushes (one frame, or one item of a ``heartbeats`` frame), and
the caps on its fields. Re-exported by :mod:`console.gateway.protocol`; its own module so the
hand-written validator of batched beats (:mod:`console.gateway.beat_validation`) and the
protocol share it without importing each other."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from console.model import Resource

MAX_RESOURCES = 64  # resources reported by one heartbeat
MAX_SEQ = 2**53  # a heartbeat's seq (epoch milliseconds fit many times over)
MAX_INTERVAL_S = 3600.0  # a heartbeat's announced cadence
MAX_TIMEOUT_S = 86_400.0  # a heartbeat's announced timeout
MAX_BACKEND = 32  # characters of a beat's backend name
MAX_CONTEXT = 128  # ... of its context
MAX_NAME = 512  # ... of its native id and of its in-flight step
PHASES = ("running", "waiting", "paused", "cancelled", "completed", "failed")


class AgentHeartbeat(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["heartbeat"]
    backend: str = Field(min_length=1, max_length=MAX_BACKEND)
    context: str | None = Field(default=None, max_length=MAX_CONTEXT)
    native_id: str = Field(min_length=1, max_length=MAX_NAME)
    seq: int = Field(default=0, ge=0, le=MAX_SEQ)
    at: datetime | None = None
    progress: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    details: dict[str, Any] = Field(default_factory=dict)
    resources: list[Resource] | None = Field(default=None, max_length=MAX_RESOURCES)
    interval_s: float | None = Field(default=None, gt=0, le=MAX_INTERVAL_S,
                                     allow_inf_nan=False)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S,
                                    allow_inf_nan=False)
    in_flight_step: str | None = Field(default=None, max_length=MAX_NAME)
    phase: Literal["running", "waiting", "paused", "cancelled", "completed", "failed"] = (
        "running"
    )
