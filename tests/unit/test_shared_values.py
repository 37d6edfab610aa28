"""Runs in the gateway's index share what they hold alike (shared_values.py), and what is
shared never leaks from one run into another: a run with its own resources, interrupts or
details keeps them; contracts stay each run's own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from console.gateway.hub import Hub
from console.gateway.protocol import AgentHeartbeat
from console.model import Interrupt, Resource, Run

T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)


def _run(i: int, **kw: object) -> Run:
    return Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local", native_id=f"wf-{i}",
               name="nightly", started_at=T0 - timedelta(minutes=i), **kw)  # type: ignore[arg-type]


def test_indexed_runs_are_records_sharing_empties_and_contract_rest() -> None:
    hub = Hub(clock=lambda: T0)
    hub.observe_runs([_run(i) for i in range(3)])
    a, b = hub.runs["dbos:local/wf-0"], hub.runs["dbos:local/wf-1"]
    assert not hasattr(a, "__dict__")  # a record: its fields in slots, no dict per run
    for field in ("resources", "interrupts", "action_notes", "details"):
        assert getattr(a, field) is getattr(b, field), field
    assert hub._contracts[a.id] is hub._contracts[b.id]  # the rest: one bytes object
    for run in (a, b):
        assert json.loads(hub.contract_bytes(run, T0)) == run.contract(T0)


def test_a_run_with_its_own_values_keeps_them() -> None:
    hub = Hub(clock=lambda: T0)
    gpu = Resource(kind="gpu", id="gpu-0")
    hub.observe_runs([_run(0, resources=[gpu], details={"k": 1}), _run(1)])
    intr = Interrupt(id="dbos:local/wf-0#i-1", run_id="dbos:local/wf-0", native_id="i-1",
                     title="ok?", created_at=T0)
    hub.observe_interrupts("dbos:local", [intr], True, lambda _iid: None)
    own, plain = hub.runs["dbos:local/wf-0"], hub.runs["dbos:local/wf-1"]
    assert own.resources == [gpu] and own.details == {"k": 1} and own.interrupts == ["dbos:local/wf-0#i-1"]
    assert plain.resources == [] and plain.details == {} and plain.interrupts == []
    assert json.loads(hub.contract_bytes(own, T0)) == own.contract(T0)
    assert json.loads(hub.contract_bytes(plain, T0)) == plain.contract(T0)


def test_a_first_beat_is_filed_under_the_index_id_string() -> None:
    hub = Hub(clock=lambda: T0)
    hub.observe_runs([_run(0)])
    frame_copy = "".join(["dbos:local/", "wf-0"])  # equal, another object
    hub.agent_heartbeat(frame_copy, AgentHeartbeat(
        type="heartbeat", backend="dbos", context="local", native_id="wf-0", seq=1, at=T0,
        interval_s=5.0), now=T0)
    key = next(iter(hub._beats))
    assert key == frame_copy and key is hub.runs[frame_copy].id
