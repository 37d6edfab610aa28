"""Leaks and the conditions they raise (console/leak_conditions.py): which resources count as
leaked, ``leak_suspected`` one per resource, ``held_too_long`` for a paused run keeping a
resource past the configured time (and not before, and not for a released one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.alert_model import AlertKind
from console.leak_conditions import held_too_long, leak_suspected, leaks
from console.model import Resource, Run, RunState

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _run(native: str, state: RunState, *resources: Resource, beat_ago_s: float = 600) -> Run:
    return Run(id=f"dbos:local/{native}", backend="dbos", context="local", native_id=native,
               state=state, resources=list(resources),
               heartbeat_at=NOW - timedelta(seconds=beat_ago_s))


GPU = Resource(id="gpu-0", kind="gpu", on_pause="keep", state="held")


def test_a_resource_held_by_an_ended_run_and_one_past_its_release_report_are_leaks() -> None:
    runs = [
        _run("done", RunState.COMPLETED, GPU, Resource(id="lock", state="released")),
        _run("cancelled", RunState.CANCELLING,
             Resource(id="sandbox", kind="sandbox", state="suspected_leak"), beat_ago_s=60),
        _run("alive", RunState.RUNNING, GPU),  # running and holding: fine
        _run("paused", RunState.PAUSED, GPU),  # kept on pause by design: not a leak
    ]
    found = leaks(runs, NOW)
    assert [(f.run_id, f.resource_id, f.reason) for f in found] == [
        ("dbos:local/done", "gpu-0", "run_ended"),
        ("dbos:local/cancelled", "sandbox", "no_release_report"),
    ]
    first = found[0].contract(NOW)
    assert first["age_s"] == 600.0 and first["kind"] == "gpu" and first["cost"] is None
    assert first["run_state"] == "completed"


def test_a_known_price_gives_a_leak_its_cost_so_far() -> None:
    (leak,) = leaks([_run("done", RunState.FAILED, GPU, beat_ago_s=1800)], NOW,
                    price_per_hour=lambda kind: 4.0 if kind == "gpu" else None)
    assert leak.cost == 2.0


def test_leak_suspected_is_one_condition_per_leaked_resource() -> None:
    runs = [_run("done", RunState.TERMINATED, GPU, Resource(id="disk", kind="volume"))]
    conditions = leak_suspected(runs, NOW)
    assert [c.key for c in conditions] == [
        "leak_suspected:dbos:local/done/disk", "leak_suspected:dbos:local/done/gpu-0"]
    gpu = conditions[1]
    assert gpu.kind is AlertKind.LEAK_SUSPECTED and gpu.run == "dbos:local/done"
    assert gpu.backend == "dbos" and gpu.context == "local"
    assert gpu.action == "irq release dbos:local/done gpu-0 --force"
    assert "terminated" in gpu.detail and gpu.since == NOW - timedelta(seconds=600)


def test_held_too_long_only_past_the_configured_time_and_only_for_kept_held_resources() -> None:
    paused = _run("p", RunState.PAUSED, GPU, Resource(id="tmp", on_pause="release",
                                                       state="released"))
    released = _run("r", RunState.PAUSED, Resource(id="gpu-1", kind="gpu", state="released"))
    resumed = _run("q", RunState.RUNNING, GPU)
    since = {paused.id: NOW - timedelta(hours=2), released.id: NOW - timedelta(hours=2),
             resumed.id: NOW - timedelta(hours=2)}
    (cond,) = held_too_long([paused, released, resumed], since, NOW,
                            price_per_hour=lambda kind: 3.0)
    assert cond.kind is AlertKind.HELD_TOO_LONG and cond.subject == paused.id
    assert cond.facts["resources"] == ["gpu-0"] and cond.facts["cost"] == 6.0
    assert "gpu gpu-0" in cond.detail and cond.since == since[paused.id]
    assert held_too_long([paused], since, NOW, after=timedelta(hours=3)) == []
    assert held_too_long([paused], {}, NOW) == []  # no pause in the ledger: nothing to say
