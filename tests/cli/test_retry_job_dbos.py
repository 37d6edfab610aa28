"""``irq retry --filter 'state:failed'`` as a durable job on a real DBOS worker (SQLite;
nothing mocked): three three-step pipelines fail in their third step; one job retries each
exactly once (one fork per run, counted outside the engine: the first two steps ran once per
pipeline, the third twice; one applied ``retry`` per target in the audit); the job carries
``--from STEP`` to every target's command, names each target's new run, and ``--wait``
follows those new runs until their work is back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import irq, start_gateway, start_retry_agent
from test_retry_dbos import eventually

from console.processes import stop_process

pytestmark = [pytest.mark.slow]

PIPELINES = [f"dbos:local/pipeline-{n}" for n in (1, 2, 3)]


def runs(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = irq("runs", "-o", "json", env=env)
    assert out.code == 0, out.stderr
    return {r["id"]: r for r in json.loads(out.stdout)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    from console.demo.launcher import dbos_backend_url

    home = tmp_path_factory.mktemp("retry-job-home")
    work = tmp_path_factory.mktemp("retry-job-work")
    (work / "fail").touch()
    db = work / "agent.db"
    agent, log = start_retry_agent(db, work, 3)
    gateway = None
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the worker's database")
        assert agent.poll() is None, (work / "agent.log").read_text()
        gateway = start_gateway(home, [dbos_backend_url(db) + "?poll=0.3"])
        yield work, {**gateway.env(gateway.operator), "IRQ_HOME": str(home)}
    finally:
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


def test_a_retry_job_over_three_failed_runs_retries_each_exactly_once(
        fleet: tuple[Path, dict[str, str]]):
    work, env = fleet
    eventually(lambda: all(runs(env).get(p, {}).get("state") == "failed" for p in PIPELINES),
               "the three pipelines to fail")
    (work / "fail").unlink()

    # the dry run lists every target and a sample plan naming the step the job retries from
    dry = irq("retry", "--filter", "state:failed", "--from", "publish", "--dry-run",
              "-o", "json", env=env)
    assert dry.code == 0, dry.stdout + dry.stderr
    planned = json.loads(dry.stdout)
    assert sorted(planned["targets"]) == PIPELINES and planned["from_step"] == "publish"
    assert planned["samples"][0]["steps_kept"] == ["fetch_data", "transform"]

    # --wait follows the work where it goes on: each target's new run (a DBOS fork)
    made = irq("retry", "--filter", "state:failed", "--from", "publish", "--yes",
               "--reason", "warehouse fixed", "--wait", "90", "-o", "json", env=env)
    assert made.code == 0, made.stdout + made.stderr
    out = json.loads(made.stdout)
    results = {r["target"]: r for r in out["results"]}
    assert {t: r["outcome"] for t, r in results.items()} == dict.fromkeys(PIPELINES, "applied")
    forks = {r["new_run_id"] for r in results.values()}
    assert len(forks) == 3 and not forks & set(PIPELINES)
    # the retry's effect is its work running again (or already done): what --wait waits for
    assert {w["target"] for w in out["waited"]} == forks
    assert all(w["ok"] and w["state"] in ("running", "completed") for w in out["waited"])
    jobs = irq("jobs", "-o", "json", env=env)
    (job,) = json.loads(jobs.stdout)
    assert (job["action"], job["done"], job["failed"], job["from_step"]) == (
        "retry", 3, 0, "publish")
    shown = irq("jobs", "show", job["id"], "-o", "json", env=env)
    assert {i["target"]: i["new_run_id"] for i in json.loads(shown.stdout)["items"]} == {
        t: r["new_run_id"] for t, r in results.items()}
    eventually(lambda: all(runs(env)[f]["state"] == "completed" for f in forks),
               "the three forks to complete")
    lines = [line.split() for line in (work / "counts").read_text().splitlines()]
    per_pipeline = {(p, s): sum(1 for line in lines if line == [p, s]) for p, s in lines}
    for n in (1, 2, 3):  # each run's first two steps once, its failed step twice
        assert [per_pipeline.get((f"pipeline-{n}", s)) for s in
                ("fetch_data", "transform", "publish")] == [1, 1, 2], per_pipeline
    audit = irq("audit", "-o", "json", env=env)
    retried = [e["target"] for e in json.loads(audit.stdout)
               if e["action"] == "retry" and e["outcome"] == "applied"]
    assert sorted(retried) == PIPELINES
