"""Bulk actions by filter against a real gateway and real DBOS agents in two backend
contexts (51 runs: 40 hold a GPU, 11 only a CPU lease): the cap refuses 51 without --max;
a pause of the 40 GPU runs lists them and the plan per backend, asks once, applies to each
(per-item results) and --wait sees every release confirmed, while the 11 others are
untouched; a "no" does nothing; a partial failure is reported per item with its exit code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bulk_fleet import BulkFleet, Scope, bulk_fleet
from cli_harness import irq

pytestmark = [pytest.mark.slow]

GPU_FILTER = "backend:dbos has:gpu"


@pytest.fixture
def fleet(irq_home: Path) -> Iterator[BulkFleet]:
    with bulk_fleet(irq_home, [Scope("east", gpu=20, cpu=6), Scope("west", gpu=20, cpu=5)]) as f:
        yield f


def gpu_ids() -> set[str]:
    return {f"dbos:{ctx}/wf-{ctx}-gpu-{i:02d}" for ctx in ("east", "west") for i in range(20)}


def cpu_ids() -> set[str]:
    return {f"dbos:east/wf-east-cpu-{i:02d}" for i in range(6)} | {
        f"dbos:west/wf-west-cpu-{i:02d}" for i in range(5)
    }


def test_bulk_pause_by_filter(fleet: BulkFleet, monkeypatch: pytest.MonkeyPatch):
    env = fleet.env()
    assert set(fleet.view().runs) == gpu_ids() | cpu_ids()

    # the cap: 51 selected, the default --max is 50 -> refused, nothing done
    capped = irq("pause", "--filter", "state:active", "--yes", env=env)
    assert capped.code == 2, capped.stdout + capped.stderr
    assert "selects 51 runs" in capped.stderr and "--max 51" in capped.stderr
    assert not any(r.state.value in ("pausing", "paused") for r in fleet.view().runs.values())

    # no terminal and no --yes: refused before anything is sent
    blind = irq("pause", "--filter", GPU_FILTER, env=env)
    assert blind.code == 2 and "without confirmation" in blind.stderr

    # ids and a filter together are a usage error
    both = irq("pause", "dbos:east/wf-east-gpu-00", "--filter", GPU_FILTER, "--yes", env=env)
    assert both.code == 2 and "not both" in both.stderr

    # dry run: the combined plan of the 40 (lock released, GPU kept, per run)
    dry = irq("pause", "--filter", GPU_FILTER, "--dry-run", "-o", "json", env=env)
    assert dry.code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert set(plan["targets"]) == gpu_ids()
    assert {(r["run_id"], r["id"]) for r in plan["resources_released"]} == {
        (t, "db-lock") for t in gpu_ids()
    }
    assert {(r["run_id"], r["id"]) for r in plan["resources_kept"]} == {
        (t, "gpu-0") for t in gpu_ids()
    }

    # on a terminal: the operator sees every target and the plan, is asked once, says yes
    monkeypatch.setattr("console.cli.confirm.interactive", lambda: True)
    paused = irq(
        "pause", "--filter", GPU_FILTER, "--reason", "GPU pool reclaimed", "--wait", "45",
        "-o", "json", env=env, input="y\n",
    )
    assert paused.code == 0, paused.stdout + paused.stderr
    assert paused.stderr.count("pause these 40 run(s)?") == 1
    assert paused.stderr.count("[y/N]") == 1
    for target in gpu_ids():
        assert target in paused.stderr  # every target listed before the question
    assert "dbos:east: 20 run(s), 20 kept, 20 released, 0 at risk" in paused.stderr
    assert "dbos:west: 20 run(s), 20 kept, 20 released, 0 at risk" in paused.stderr
    out = json.loads(paused.stdout[paused.stdout.index("{"):])  # (the runner echoes the "y")
    results = {r["target"]: r["outcome"] for r in out["results"]}
    assert results == dict.fromkeys(gpu_ids(), "applied")  # one result per item
    waited = {w["target"]: w["outcome"] for w in out["waited"]}
    assert waited == dict.fromkeys(gpu_ids(), "paused")  # each one's releases confirmed

    view = fleet.view()
    for target in gpu_ids():
        run = view.runs[target]
        assert run.state.value == "paused", target
        assert {r.id: r.state for r in run.resources} == {"gpu-0": "held", "db-lock": "released"}
    released = fleet.released("east") | fleet.released("west")
    assert {(t.partition("/")[2], "db-lock") for t in gpu_ids()} <= released
    # the runs outside the filter are untouched: running, holding their lease
    for target in cpu_ids():
        run = view.runs[target]
        assert run.state.value in ("running", "late"), (target, run.state)
        assert [r.state for r in run.resources] == ["held"]
    assert not any(rid == "cpu-0" for _, rid in released)

    # a "no" does nothing (exit 1)
    declined = irq("resume", "--filter", "state:paused", env=env, input="n\n")
    assert declined.code == 1, declined.stdout + declined.stderr
    assert "nothing done" in declined.stderr
    assert all(fleet.view().runs[t].state.value == "paused" for t in gpu_ids())

    # partial failure: pausing all 51 (with --max raised) applies to the 11 running ones and
    # is refused per item for the 40 already paused; the exit code is the failures' (4)
    # (--wait waits for the applied ones only; the command failures decide the exit code)
    mixed = irq("pause", "--filter", "has:resource", "--max", "60", "--yes", "--wait", "30",
                "-o", "json", env=env)
    assert mixed.code == 4, mixed.stdout + mixed.stderr
    out = json.loads(mixed.stdout)
    outcomes = {r["target"]: r["outcome"] for r in out["results"]}
    assert outcomes == {**dict.fromkeys(gpu_ids(), "conflict"),
                        **dict.fromkeys(cpu_ids(), "applied")}
    assert {w["target"]: w["outcome"] for w in out["waited"]} == dict.fromkeys(
        cpu_ids(), "paused"
    )
    text = irq("resume", "--filter", "ctx:east name:indexer", "--yes", env=env)
    assert text.code == 0, text.stdout + text.stderr
    assert text.stdout.count("applied") == 6  # the per-item table: one row per run
