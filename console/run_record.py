"""A run as the gateway's index keeps it: :class:`~console.model.Run`'s fields in slots.

A pydantic ``Run`` keeps its 31 fields in an instance dict: 832 bytes a run, one field past
what CPython's shared-key dicts hold, so every run paid for a whole table; with the object
and the copy each state change makes, a third of the gateway's memory at 100,000 runs. The
index keeps :class:`RunRecord`\\ s instead (280 bytes: the fields and no dict) and builds a
``Run`` only where one leaves the index (:meth:`RunRecord.to_run`: a command's plan, a
peer). Both read alike (:data:`RunFacts`): the same fields, the same ``contract`` and
liveness methods, computed by the same functions (console/model.py) for either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from console.model import (
    Action,
    Resource,
    Run,
    RunState,
    run_contract,
    suspected_state,
)
from console.run_facts import RunError, StepRetry


@dataclass(slots=True, eq=False)
class RunRecord:
    """Run's fields, in Run's order (tests/unit/test_run_record.py holds them equal). The
    index shares its values' objects between versions (one version replaces another; no one
    changes a list or dict of a record in place)."""

    id: str
    backend: str
    context: str
    native_id: str
    name: str
    state: RunState
    native_state: str
    heartbeat_at: datetime | None
    observed_at: datetime | None
    heartbeat_interval_s: float | None
    heartbeat_timeout_s: float | None
    progress: float | None
    resources: list[Resource]
    interrupts: list[str]
    warnings: list[str]
    started_at: datetime | None
    updated_at: datetime
    preempted: bool
    attempt: int | None
    in_flight_step: str | None
    heartbeat_expected: bool
    step_timeout_s: float | None
    abort_timeout_s: float | None
    checkpointer: str | None
    app_version: str | None
    version_pinned: bool | None
    action_notes: dict[Action, list[str]]
    error: RunError | None
    retrying: StepRetry | None
    last_step_at: datetime | None
    details: dict[str, Any]

    @staticmethod
    def of(run: Run, update: dict[str, Any] | None = None) -> RunRecord:
        """``run``'s fields as a record (``update``: some of them replaced)."""
        values = run.__dict__
        if update:
            values = {**values, **update}
        return RunRecord(*[values[name] for name in FIELDS])

    def replace(self, update: dict[str, Any]) -> RunRecord:
        """A new version: this one's fields with ``update``'s."""
        values = list(_all_values(self))
        for name, value in update.items():
            values[_INDEX[name]] = value
        return RunRecord(*values)

    def fields(self) -> dict[str, Any]:
        """The fields by name (a comparison, a ``Run``)."""
        return dict(zip(FIELDS, _all_values(self), strict=True))

    def to_run(self) -> Run:
        """The run as a ``Run`` model, for what leaves the index (its values shared)."""
        return Run.model_construct(**self.fields())

    def suspected_state(
        self, now: datetime | None = None, state: RunState | None = None
    ) -> RunState | None:
        return suspected_state(self, now, state)

    def contract(self, now: datetime | None = None) -> dict[str, Any]:
        return run_contract(self, now)


#: a run as a client reads it (a ``Run``) or as the gateway's index keeps it
RunFacts = Run | RunRecord

FIELDS: tuple[str, ...] = tuple(RunRecord.__dataclass_fields__)
_INDEX = {name: i for i, name in enumerate(FIELDS)}
_all_values = attrgetter(*FIELDS)
