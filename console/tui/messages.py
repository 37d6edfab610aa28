"""Messages the live feed posts to the app (workers never touch widgets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from console.client import ConnectionStatus
from console.model import AuditEntry


class FleetBatch(Message):
    """One batch of events the client applied to its FleetView."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__()
        self.events = events


class StatusChanged(Message):
    """The connection to the gateway changed state."""

    def __init__(self, status: ConnectionStatus) -> None:
        super().__init__()
        self.status = status


class LagMeasured(Message):
    """A ping round trip completed (None: no answer)."""

    def __init__(self, seconds: float | None) -> None:
        super().__init__()
        self.seconds = seconds

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LagMeasured)


@dataclass
class FleetChange:
    """What changed since the last redraw, accumulated over many batches."""

    runs: set[str] | None = field(default_factory=set)  # None: everything (snapshot)
    interrupts: bool = False
    backends: bool = False
    audit: list[AuditEntry] = field(default_factory=list)
    reordered: bool = False
    obligations: bool = False  # an obligation or the policy version changed
    alerts: bool = False  # an alert was raised, acknowledged, silenced or cleared

    @property
    def empty(self) -> bool:
        return self.runs == set() and not (self.interrupts or self.backends or self.audit
                                           or self.obligations or self.alerts)

    def add(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            kind = event.get("kind")
            data = event.get("data") or {}
            if kind == "snapshot":
                self.runs = None
                self.interrupts = self.backends = self.obligations = self.alerts = True
            elif kind in ("run", "run_removed", "beat"):
                if self.runs is not None and data.get("id"):
                    self.runs.add(str(data["id"]))
            elif kind in ("interrupt", "interrupt_removed"):
                self.interrupts = True
                run_id = data.get("run_id")
                if run_id and self.runs is not None:
                    self.runs.add(str(run_id))
            elif kind == "backend":
                self.backends = True
            elif kind in ("obligation", "policy"):
                self.obligations = True
            elif kind == "alert":
                self.alerts = True
            elif kind == "audit":
                try:
                    self.audit.append(AuditEntry.model_validate(data))
                except ValueError:
                    pass
