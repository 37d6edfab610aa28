"""The gateway's index keeps runs as records (console/run_record.py): Run's fields in slots.
A record reads as the Run it was made from (fields, contract, liveness), a new version
leaves the old one as it was, and the record is a fraction of the model's memory."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

from console.model import Action, Resource, Run, RunState
from console.run_facts import RunError
from console.run_record import FIELDS, RunRecord

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def _run() -> Run:
    return Run(id="dbos:local/wf-1", backend="dbos", context="local", native_id="wf-1",
               name="nightly", state=RunState.FAILED, heartbeat_at=T0 - timedelta(seconds=3),
               heartbeat_interval_s=5.0, heartbeat_timeout_s=12.0, progress=0.4,
               resources=[Resource(kind="gpu", id="gpu-0", detail="count=2")],
               warnings=["w"], started_at=T0 - timedelta(hours=1), updated_at=T0,
               action_notes={Action.PAUSE: ["kept"]}, details={"k": 1},
               error=RunError(type="Boom", message="503", step="publish", at=T0),
               last_step_at=T0 - timedelta(minutes=5))


def test_a_record_has_runs_fields_in_runs_order() -> None:
    assert FIELDS == tuple(Run.model_fields)


def test_a_record_reads_as_the_run_it_was_made_from() -> None:
    run = _run()
    record = RunRecord.of(run)
    for name in FIELDS:
        assert getattr(record, name) == getattr(run, name), name
    assert record.contract(T0) == run.contract(T0)
    later = T0 + timedelta(seconds=30)
    running = RunRecord.of(run, {"state": RunState.RUNNING})
    assert running.suspected_state(later) is RunState.LOST
    assert running.suspected_state(later) == run.model_copy(
        update={"state": RunState.RUNNING}).suspected_state(later)
    assert record.contract(T0)["heartbeat_age_s"] == run.heartbeat_age_s(T0) == 3.0
    assert record.to_run() == run


def test_a_new_version_leaves_the_old_one_as_it_was() -> None:
    old = RunRecord.of(_run())
    new = old.replace({"state": RunState.RUNNING, "progress": 0.9})
    assert (old.state, old.progress) == (RunState.FAILED, 0.4)
    assert (new.state, new.progress) == (RunState.RUNNING, 0.9)
    assert new.resources is old.resources  # values shared, not copied
    assert new.fields() == {**old.fields(), "state": RunState.RUNNING, "progress": 0.9}


def test_a_record_holds_no_dict_and_is_a_third_of_the_model() -> None:
    run = _run()
    record = RunRecord.of(run)
    assert not hasattr(record, "__dict__")
    model = sys.getsizeof(run) + sys.getsizeof(run.__dict__)
    assert sys.getsizeof(record) * 3 <= model
