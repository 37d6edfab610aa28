"""Durable bulk jobs against real DBOS agents and real gateways: ``--filter`` hands the
confirmed targets to the gateway as a job. Its targets are fixed at confirmation (a run that
matches the filter later is not swept in); the CLI going away (detached, or SIGKILLed while
following) does not stop it; ``irq jobs cancel`` does; and with two gateways on one
PostgreSQL journal, SIGKILLing the gateway driving a job mid-way leaves the peer to finish
it with every target acted on once (one applied command per target in the audit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bulk_fleet import AGENT, BulkFleet, Scope, bulk_fleet, eventually
from cli_harness import ROOT, irq

from console.processes import stop_process
from tests.adapters.postgres_server import PostgresServer
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.support.crashable_gateway import gateway_pair

pytestmark = [pytest.mark.slow]


@pytest.fixture
def fleet(irq_home: Path) -> Iterator[BulkFleet]:
    with bulk_fleet(irq_home, [Scope("east", gpu=8)]) as f:
        yield f


def gpu(i: int, ctx: str = "east") -> str:
    return f"dbos:{ctx}/wf-{ctx}-gpu-{i:02d}"


def jobs(env: dict[str, str]) -> list[dict[str, Any]]:
    out = irq("jobs", "-o", "json", env=env)
    assert out.code == 0, out.stdout + out.stderr
    return list(json.loads(out.stdout))


def show(job_id: str, env: dict[str, str]) -> dict[str, Any]:
    out = irq("jobs", "show", job_id, "-o", "json", env=env)
    assert out.code == 0, out.stdout + out.stderr
    return dict(json.loads(out.stdout))


def states(fleet: BulkFleet) -> dict[str, str]:
    return {rid: run.state.value for rid, run in fleet.view().runs.items()}


def test_a_job_keeps_its_confirmed_targets_outlives_the_cli_and_stops_when_cancelled(
        fleet: BulkFleet):
    env = fleet.env()
    # a followed job: the per-item table from the job's record (and --wait's effects)
    paused = irq("pause", "--filter", "id:gpu-00,gpu-01,gpu-02", "--yes", "--wait", "30",
                 "-o", "json", env=env)
    assert paused.code == 0, paused.stdout + paused.stderr
    out = json.loads(paused.stdout)
    assert {r["target"]: r["outcome"] for r in out["results"]} == dict.fromkeys(
        (gpu(0), gpu(1), gpu(2)), "applied")
    (first,) = jobs(env)
    assert first["state"] == "done" and (first["targets"], first["done"]) == (3, 3)
    assert first["action"] == "pause" and first["filter"] == "id:gpu-00,gpu-01,gpu-02"

    # detached at 2/s: the CLI is gone at once; a run paused after confirmation matches the
    # filter too, and is not swept in
    made = irq("resume", "--filter", "state:paused", "--yes", "--rate", "2/s", "--detach",
               "-o", "json", env=env)
    assert made.code == 0, made.stdout + made.stderr
    job = json.loads(made.stdout)
    assert job["targets"] == 3 and job["rate_per_s"] == 2.0 and job["created_by"] == "ops-test"
    late = irq("pause", gpu(3), "--yes", "--wait", "30", env=env)
    assert late.code == 0, late.stdout + late.stderr
    done = eventually(lambda: (j := show(job["id"], env))["state"] == "done" and j,
                      "the detached job done", timeout=30)
    assert (done["done"], done["failed"], done["remaining"]) == (3, 0, 0)
    assert {i["target"] for i in done["items"]} == {gpu(0), gpu(1), gpu(2)}
    eventually(lambda: all(states(fleet)[gpu(i)] in ("running", "late") for i in range(3)),
               "the three resumed")
    assert states(fleet)[gpu(3)] == "paused"  # matched later: not the job's

    # a CLI following a slow job is SIGKILLed: the job goes on; then it is cancelled
    follower = subprocess.Popen(
        [sys.executable, "-m", "console.cli.app", "pause", "--filter", "name:trainer",
         "--max", "20", "--yes", "--rate", "1/s"],
        env={**os.environ, **env}, cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        slow = eventually(lambda: next((j for j in jobs(env) if j["state"] == "running"),
                                       None), "the followed job", timeout=30)
        eventually(lambda: show(slow["id"], env)["done"] >= 1, "a first target sent")
    finally:
        follower.send_signal(signal.SIGKILL)
        follower.wait(10)
    before = show(slow["id"], env)["done"]
    eventually(lambda: show(slow["id"], env)["done"] > before, "progress without the CLI")
    no = irq("jobs", "cancel", slow["id"], "--reason", "enough", env=env, input="n\n")
    assert no.code == 2 and "without confirmation" in no.stderr  # no terminal, no --yes
    cancelled = irq("jobs", "cancel", slow["id"], "--yes", "--reason", "enough", env=env)
    assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
    stopped = show(slow["id"], env)
    assert stopped["state"] == "cancelled" and stopped["cancelled_by"] == "ops-test"
    assert stopped["remaining"] > 0
    time.sleep(2.5)  # at 1/s, two more would have been sent by now
    after = show(slow["id"], env)
    assert after["done"] + after["failed"] == stopped["done"] + stopped["failed"]
    unsent = set(after["remaining_targets"])
    assert unsent and all(states(fleet)[t] not in ("paused", "pausing") for t in unsent
                          if t != gpu(3))
    audit = irq("audit", "--action", "job_cancel", "-o", "json", env=env)
    assert [(e["target"], e["reason"]) for e in json.loads(audit.stdout)] == [
        (slow["id"], "enough")]
    again = irq("jobs", "cancel", slow["id"], "--yes", env=env)
    assert again.code == 4  # already cancelled: a conflict


@pytest.fixture
def pg_pair(tmp_path: Path, postgres_server: PostgresServer) -> Iterator[tuple[Any, ...]]:
    """Two gateways on one fresh PostgreSQL journal and one DBOS agent with 12 runs."""
    from console.demo.launcher import dbos_backend_url
    from console.gateway.auth import create_token
    from console.model import Role

    with postgres_server.connect("postgres", autocommit=True) as conn:
        conn.execute('CREATE DATABASE "jobs_shared"')
    db = tmp_path / "east.db"
    backend = dbos_backend_url(db) + "?context=east&poll=0.3"
    a, b = gateway_pair(tmp_path, backend, postgres_server.url("jobs_shared"))
    token = create_token(Role.AGENT, "bulk-agent", b.home)
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), "--db", str(db), "--events", str(tmp_path / "ev.jsonl"),
         "--prefix", "east", "--gpu", "12"],
        env={**os.environ, "IRQ_AGENT_URL": f"ws://127.0.0.1:{b.port}/agent",
             "IRQ_AGENT_TOKEN": token, "PYTHONPATH": str(ROOT)},
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        eventually(lambda: db.exists(), "the agent's database")
        b.start()
        a.start()
        yield a, b
    finally:
        stop_process(agent)
        a.stop()
        b.stop()


def test_a_peer_finishes_the_job_of_a_killed_gateway_acting_on_each_target_once(
        pg_pair: tuple[Any, ...]):
    a, b = pg_pair
    env_a = {"IRQ_URL": a.url, "IRQ_TOKEN": a.tokens["operator"]}
    env_b = {"IRQ_URL": b.url, "IRQ_TOKEN": b.tokens["operator"]}
    targets = {gpu(i) for i in range(12)}

    def running() -> bool:
        out = irq("runs", "--filter", "name:trainer state:active", "-o", "json", env=env_a)
        return out.code == 0 and {r["id"] for r in json.loads(out.stdout)} >= targets

    eventually(running, "12 runs seen through gateway a", timeout=60)
    made = irq("cancel", "--filter", "name:trainer state:active", "--yes", "--rate", "3/s",
               "--detach", "-o", "json", env=env_a)
    assert made.code == 0, made.stdout + made.stderr
    job_id = json.loads(made.stdout)["id"]
    eventually(lambda: show(job_id, env_a)["done"] >= 3, "a few targets cancelled by a")
    assert show(job_id, env_a)["driven_by"] == a.owner
    a.process.send_signal(signal.SIGKILL)  # only this gateway's pid
    a.process.wait(10)
    done = eventually(lambda: (j := show(job_id, env_b))["state"] == "done" and j,
                      "gateway b finishing the job", timeout=60)
    assert (done["done"], done["failed"], done["targets"]) == (12, 0, 12), done
    assert done["driven_by"] == b.owner and done["takeovers"] >= 1
    audit = irq("audit", "--action", "cancel", "--limit", "1000", "-o", "json", env=env_b)
    applied = [e["target"] for e in json.loads(audit.stdout) if e["outcome"] == "applied"]
    assert sorted(applied) == sorted(targets)  # one applied command per target
