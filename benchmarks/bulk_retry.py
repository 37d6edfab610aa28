"""A bulk retry of failed runs as one job, on DBOS (SQLite) and Temporal (dev server), against
what a skilled user would run with the same server and client; and a gateway SIGKILLed
halfway through the job (``make bench-recovery``).

Real components only: ``irq serve`` processes, the ``irq`` CLI as an operator runs it, a
plain DBOS worker (benchmarks/bulk_retry_dbos_agent.py) and a plain Temporal worker
(benchmarks/bulk_retry_temporal_worker.py) whose three-step runs fail in their third step
while a flag file exists; every step execution is counted in a file outside the engine.

For each backend: ``--runs`` runs fail; the flag is cleared; then

- **irq**: ``irq retry --filter 'state:failed' --yes --detach --rate R`` against a warm
  gateway (its view already holds the failed runs). Measured from the CLI's start: the CLI's
  wall and CPU time (it exits once the job is recorded: confirmation), the job's runtime in
  the gateway (created -> finished, runs/s), and the time until every retried run's third
  step succeeded. The CLI's share after confirmation is none: it has exited while the job
  was still running, and the job finishes without it.
- **baseline, DBOS**: a warm ``DBOSClient``: one ``list_workflows(status="ERROR")`` and a
  loop of ``fork_workflow(id, start_step=<the failed step>)`` (``resume_workflow`` does
  nothing for ERROR runs).
- **baseline, Temporal**: the CLI's batch reset (``temporal workflow reset --query … --type
  FirstWorkflowTask --yes``: the only batch type that re-runs the failed step, and it re-runs
  the first two as well: the counts show it), and a warm client loop (8 at a time, as the
  job's 8 in flight) that reads each history and calls ``reset_workflow_execution`` to the
  workflow task that scheduled the failed activity (what irq does: the first two kept).

Each approach retries its own fresh set of failed runs on the same servers and workers.

**Kill phase** (DBOS): two gateways on one PostgreSQL journal; the job is created on one;
the gateway driving it is SIGKILLed (by its pid) once half the targets are done; the peer
takes the job's lease and finishes it. Verified: every run's third step executed exactly
twice in all (the first two once), one applied ``retry`` command per target in the journal,
one fork per run in DBOS.

Prints a table and writes ``benchmarks/results/bulk_retry.json``.

    python benchmarks/bulk_retry.py [--runs 1000] [--rate 200] [--kill-rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.temporal.dev_server import DevServer, temporal_cli  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402
from console.client import GatewayClient, GatewayError  # noqa: E402
from console.model import RunState  # noqa: E402
from console.processes import ChildProcess  # noqa: E402
from devtools.chaos.fleet import GatewayProcess, make_tokens  # noqa: E402
from devtools.chaos.storm import postgres_journal  # noqa: E402

DBOS_AGENT = ROOT / "benchmarks" / "bulk_retry_dbos_agent.py"
TEMPORAL_WORKER = ROOT / "benchmarks" / "bulk_retry_temporal_worker.py"
STEPS = ("fetch_data", "transform", "publish")
LOOP_IN_FLIGHT = 8  # the client-loop baseline's concurrency (the job driver's IN_FLIGHT)


def wait_for(check: Callable[[], Any], timeout_s: float, what: str,
             interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval_s)
    raise SystemExit(f"timed out after {timeout_s:g} s waiting for {what}")


@dataclass
class Counts:
    """The workload's side-effect file: ``STEP NAME`` per execution, ``published NAME``."""

    path: Path

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def published(self, prefix: str) -> int:
        return sum(1 for ln in self.lines() if ln.startswith(f"published {prefix}-"))

    def failed(self, prefix: str) -> int:
        """Runs whose third step ran (and, while the flag is set, failed)."""
        return sum(1 for ln in self.lines() if ln.startswith(f"publish {prefix}-"))

    def per_run(self, prefix: str) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for line in self.lines():
            step, _, name = line.partition(" ")
            if name.startswith(f"{prefix}-"):
                out.setdefault(name, Counter())[step] += 1
        return out

    def executions(self, prefix: str) -> dict[str, int]:
        """How many times each step ran, in all, over the runs named ``prefix-*``."""
        total: Counter[str] = Counter()
        for counts in self.per_run(prefix).values():
            total.update(counts)
        return {step: total[step] for step in (*STEPS, "published")}


def irq_env(gw: GatewayProcess, token: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRQ_")}
    return {**env, "IRQ_URL": gw.url, "IRQ_TOKEN": token, "IRQ_HOME": str(home),
            "PYTHONPATH": str(ROOT)}


def irq_command() -> list[str]:
    script = Path(sys.executable).with_name("irq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "console.cli.app"]


def run_cli(args: list[str], env: dict[str, str]) -> tuple[int, str, str, float, float]:
    """The CLI as an operator runs it: exit code, stdout, stderr, wall and CPU seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.monotonic()
        proc = subprocess.Popen([*irq_command(), *args], stdout=out, stderr=err, env=env,
                                stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(), err.read().decode(), wall,
                usage.ru_utime + usage.ru_stime)


async def failed_in_view(gw: GatewayProcess, token: str, backend: str, n: int,
                         timeout_s: float = 300) -> None:
    """Until the gateway's view shows ``n`` failed runs of ``backend`` (a warm gateway)."""
    async with GatewayClient(gw.url, token) as client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            failed = sum(1 for r in client.view.runs.values()
                         if r.backend == backend and r.state is RunState.FAILED)
            if failed >= n:
                return
            await asyncio.sleep(0.25)
    raise SystemExit(f"the gateway did not show {n} failed {backend} runs in {timeout_s} s")


async def job_detail(gw: GatewayProcess, token: str, job_id: str) -> dict[str, Any]:
    async with GatewayClient(gw.url, token, subscribe=False) as client:
        return dict(await client.query("job", job_id=job_id))


async def follow_job(gw: GatewayProcess, token: str, job_id: str,
                     until: Callable[[dict[str, Any]], bool], timeout_s: float = 600
                     ) -> dict[str, Any]:
    async with GatewayClient(gw.url, token, subscribe=False) as client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = dict(await client.query("job", job_id=job_id))
            if until(job):
                return job
            await asyncio.sleep(0.1)
    raise SystemExit(f"job {job_id} did not get there in {timeout_s} s")


def _seconds(job: dict[str, Any]) -> float:
    return (datetime.fromisoformat(job["finished_at"])
            - datetime.fromisoformat(job["created_at"])).total_seconds()


def irq_retry(gw: GatewayProcess, token: str, cli_home: Path, counts: Counts, prefix: str,
              n: int, rate: float, backend: str) -> dict[str, Any]:
    """The irq path, timed from the CLI's start; the CLI is detached after confirmation."""
    asyncio.run(failed_in_view(gw, token, backend, n))
    began = time.monotonic()
    code, out, err, wall, cpu = run_cli(
        ["retry", "--filter", "state:failed", "--yes", "--detach", "--rate", f"{rate:g}/s",
         "--max", str(n), "--reason", "bench: bulk retry", "-o", "json"],
        irq_env(gw, token, cli_home))
    if code != 0:
        raise SystemExit(f"irq retry exited {code}:\n{out}\n{err}")
    created = json.loads(out)
    at_exit = asyncio.run(job_detail(gw, token, created["id"]))
    job = asyncio.run(follow_job(gw, token, created["id"], lambda j: j["state"] != "running"))
    job_done = time.monotonic() - began
    wait_for(lambda: counts.published(prefix) >= n, 600, f"{n} retried runs to complete")
    completed = time.monotonic() - began
    runtime = _seconds(job)
    return {
        "runs": n, "rate_per_s": rate, "targets": job["targets"], "done": job["done"],
        "failed": job["failed"], "failures": job["failures"][:5],
        "confirmation_s": round(wall, 2), "cli_cpu_s": round(cpu, 2),
        "job_runtime_s": round(runtime, 2), "job_runs_per_s": round(n / runtime, 1),
        "job_done_s": round(job_done, 2),
        "all_completed_s": round(completed, 2),
        "runs_per_s_to_completed": round(n / completed, 1),
        "cli_exited_with_job": {"state": at_exit["state"], "done": at_exit["done"],
                                "remaining": at_exit["remaining"]},
        "job_finished_after_cli_exit_s": round(job_done - wall, 2),
        "cli_share_after_confirmation": "none: the CLI process had exited "
                                        f"{round(job_done - wall, 2)} s before the job finished",
        "executions": counts.executions(prefix),
    }


# ---------------------------------------------------------------------------------- DBOS


@contextlib.contextmanager
def dbos_agent(work: Path, n: int, prefix: str) -> Iterator[tuple[Path, Counts]]:
    """A DBOS worker whose ``n`` runs have all failed in their third step; the flag is
    cleared before it is handed over (retries succeed)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "fail").touch()
    db = work / "sys.db"
    counts = Counts(work / "counts")
    agent = ChildProcess(f"dbos-{prefix}", [sys.executable, str(DBOS_AGENT), str(db),
                                            str(work), str(n), prefix], work / "agent.log")
    agent.start()
    try:
        wait_for(lambda: counts.failed(prefix) >= n or not agent.alive(), 600,
                 f"{n} DBOS runs to fail")
        if not agent.alive():
            raise SystemExit("the DBOS agent exited: " + agent.log_tail(30))
        wait_for(lambda: _dbos_errors(db, prefix) >= n, 120, "DBOS to record the errors")
        (work / "fail").unlink()
        yield db, counts
    finally:
        agent.stop()


def _dbos_errors(db: Path, prefix: str) -> int:
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM workflow_status WHERE status='ERROR'"
                                " AND workflow_uuid LIKE ?", (f"{prefix}-%",)).fetchone()[0])


#: the adapters' parameters for a bulk retry: DBOS lists 200 finished runs by default (a
#: filter would see 200 of 1,000 failed runs); Temporal spends 20 requests/s by default
#: (a retry is about 3: describe, history, reset -- about 7 runs/s) and reports a closed run
#: for 300 s after it closed (1,000 failures on a loaded machine take longer than that)
DBOS_PARAMS = "finished_limit=5000"
TEMPORAL_PARAMS = {"rps": 200, "closed_window": 3600}


def dbos_url(db: Path) -> str:
    return f"dbos+sqlite:///{db.resolve()}?{DBOS_PARAMS}"


def dbos_irq(work: Path, n: int, rate: float) -> dict[str, Any]:
    with dbos_agent(work / "dbos-irq", n, "irq") as (db, counts):
        gw = GatewayProcess(work / "gw-dbos", [dbos_url(db)], name="gw-dbos")
        token = make_tokens(gw.home)["operator"][0]
        gw.start()
        try:
            return irq_retry(gw, token, work / "cli", counts, "irq", n, rate, "dbos")
        finally:
            gw.stop()


def dbos_baseline(work: Path, n: int) -> dict[str, Any]:
    from dbos import DBOSClient

    with dbos_agent(work / "dbos-base", n, "base") as (db, counts):
        client = DBOSClient(system_database_url=f"sqlite:///{db}")
        try:
            one = client.list_workflows(status="ERROR", limit=1, load_input=False,
                                        load_output=False)[0]  # warm, and the failed step
            step = next(int(s["function_id"]) for s in client.list_workflow_steps(
                one.workflow_id) if s.get("error") is not None)
            began = time.monotonic()
            failed = client.list_workflows(status="ERROR", name="pipeline", load_input=False,
                                           load_output=False)
            for wf in failed:
                client.fork_workflow(wf.workflow_id, start_step=step)
            loop_s = time.monotonic() - began
            wait_for(lambda: counts.published("base") >= n, 600, f"{n} forks to complete")
            completed = time.monotonic() - began
        finally:
            client.destroy()
        return {
            "runs": n, "how": "DBOSClient: list_workflows(status=ERROR), then "
                              f"fork_workflow(id, start_step={step}) in a loop (warm client)",
            "loop_s": round(loop_s, 2), "loop_runs_per_s": round(n / loop_s, 1),
            "all_completed_s": round(completed, 2),
            "runs_per_s_to_completed": round(n / completed, 1),
            "executions": counts.executions("base"),
        }


# ------------------------------------------------------------------------------ Temporal


@dataclass
class TemporalFleet:
    server: DevServer
    queue: str
    counts: Counts
    flag: Path

    async def start_failed(self, prefix: str, n: int) -> None:
        from temporalio.client import Client

        self.flag.touch()
        client = await Client.connect(self.server.address)
        gate = asyncio.Semaphore(50)

        async def one(i: int) -> None:
            name = f"{prefix}-{i:04d}"
            async with gate:
                await client.start_workflow(
                    "Pipeline", {"name": name, "counts": str(self.counts.path),
                                 "flag": str(self.flag)}, id=name, task_queue=self.queue)

        await asyncio.gather(*(one(i) for i in range(n)))
        query = f'WorkflowId STARTS_WITH "{prefix}-" AND ExecutionStatus="Failed"'
        deadline = time.monotonic() + 600
        while (await client.count_workflows(query)).count < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"{n} Temporal runs did not fail in 600 s")
            await asyncio.sleep(0.5)
        self.flag.unlink()


def temporal_irq(fleet: TemporalFleet, work: Path, n: int, rate: float) -> dict[str, Any]:
    asyncio.run(fleet.start_failed("irq", n))
    gw = GatewayProcess(work / "gw-temporal", [fleet.server.backend_url(**TEMPORAL_PARAMS)], name="gw-temporal")
    token = make_tokens(gw.home)["operator"][0]
    gw.start()
    try:
        return irq_retry(gw, token, work / "cli", fleet.counts, "irq", n, rate, "temporal")
    finally:
        gw.stop()


def temporal_batch(fleet: TemporalFleet, n: int) -> dict[str, Any]:
    """The CLI's batch reset (FirstWorkflowTask: the only batch type that re-runs the failed
    step; LastWorkflowTask replays the failure)."""
    asyncio.run(fleet.start_failed("batch", n))
    query = 'WorkflowId STARTS_WITH "batch-" AND ExecutionStatus="Failed"'
    cli = [temporal_cli(), "--address", fleet.server.address]
    began = time.monotonic()
    made = subprocess.run([*cli, "workflow", "reset", "--query", query, "--type",
                           "FirstWorkflowTask", "--reason", "bench: bulk retry", "--yes",
                           "-o", "json"], capture_output=True, text=True, check=False)
    cli_s = time.monotonic() - began
    if made.returncode != 0:
        raise SystemExit(f"temporal workflow reset exited {made.returncode}: {made.stderr}")
    found = re.search(r'"?(?:batchJobId|jobId|job ID)"?\s*[:=]?\s*"?([0-9a-f-]{36})',
                      made.stdout + made.stderr)
    if found is None:
        raise SystemExit(f"no batch job id in: {made.stdout} {made.stderr}")

    def batch_done() -> bool:
        out = subprocess.run([*cli, "batch", "describe", "--job-id", found.group(1), "-o",
                              "json"], capture_output=True, text=True, check=False)
        state = re.search(r'"state"\s*:\s*"([A-Z_]+)"', out.stdout)
        if state is None:  # a CLI that says it differently: done once every run was reset
            return fleet.counts.published("batch") >= n
        return state.group(1).endswith(("COMPLETED", "FAILED"))

    wait_for(batch_done, 600, "the batch job", interval_s=0.5)
    batch_s = time.monotonic() - began
    wait_for(lambda: fleet.counts.published("batch") >= n, 600, f"{n} resets to complete")
    completed = time.monotonic() - began
    return {
        "runs": n, "how": f"temporal workflow reset --query '{query}' --type "
                          "FirstWorkflowTask --yes (a server-side batch job)",
        "cli_s": round(cli_s, 2), "batch_job_s": round(batch_s, 2),
        "batch_runs_per_s": round(n / batch_s, 1),
        "all_completed_s": round(completed, 2),
        "runs_per_s_to_completed": round(n / completed, 1),
        "executions": fleet.counts.executions("batch"),
        "note": "FirstWorkflowTask re-runs every activity (fetch_data and transform too); "
                "LastWorkflowTask replays the recorded failure and fails again",
    }


async def _reset_loop(address: str, prefix: str) -> int:
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
    from temporalio.client import Client

    client = await Client.connect(address)
    query = f'WorkflowId STARTS_WITH "{prefix}-" AND ExecutionStatus="Failed"'
    failed = [wf async for wf in client.list_workflows(query)]
    gate = asyncio.Semaphore(LOOP_IN_FLIGHT)

    async def one(wid: str, run_id: str) -> None:
        async with gate:
            history = await client.get_workflow_handle(wid, run_id=run_id).fetch_history()
            scheduled = [e for e in history.events
                         if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
            point = scheduled[-1].activity_task_scheduled_event_attributes
            await client.workflow_service.reset_workflow_execution(
                ResetWorkflowExecutionRequest(
                    namespace="default",
                    workflow_execution=WorkflowExecution(workflow_id=wid, run_id=run_id),
                    reason="bench: bulk retry",
                    workflow_task_finish_event_id=point.workflow_task_completed_event_id,
                    request_id=str(uuid.uuid4())))

    await asyncio.gather(*(one(wf.id, wf.run_id) for wf in failed))
    return len(failed)


def temporal_loop(fleet: TemporalFleet, n: int) -> dict[str, Any]:
    asyncio.run(fleet.start_failed("loop", n))
    from temporalio.client import Client

    asyncio.run(Client.connect(fleet.server.address))  # the server and its frontend warm
    began = time.monotonic()
    sent = asyncio.run(_reset_loop(fleet.server.address, "loop"))
    loop_s = time.monotonic() - began
    wait_for(lambda: fleet.counts.published("loop") >= n, 600, f"{n} resets to complete")
    completed = time.monotonic() - began
    return {
        "runs": n, "resets": sent,
        "how": f"temporalio client: list_workflows(query), then per workflow "
               f"fetch_history + reset_workflow_execution to the workflow task that "
               f"scheduled the failed activity, {LOOP_IN_FLIGHT} at a time",
        "loop_s": round(loop_s, 2), "loop_runs_per_s": round(n / loop_s, 1),
        "all_completed_s": round(completed, 2),
        "runs_per_s_to_completed": round(n / completed, 1),
        "executions": fleet.counts.executions("loop"),
    }


def temporal_phases(work: Path, n: int, rate: float) -> dict[str, Any]:
    server = DevServer(work / "temporal")
    server.start()
    queue = "bulk-retry"
    worker = ChildProcess("temporal-worker", [sys.executable, str(TEMPORAL_WORKER),
                                              server.address, queue], work / "worker.log")
    worker.start()
    try:
        wait_for(lambda: "ready" in (work / "worker.log").read_text(errors="replace"), 60,
                 "the Temporal worker")
        fleet = TemporalFleet(server, queue, Counts(work / "temporal-counts"),
                              work / "temporal-fail")
        irq = temporal_irq(fleet, work, n, rate)
        print(f"  temporal irq: {irq['job_runs_per_s']} runs/s in the job", file=sys.stderr)
        batch = temporal_batch(fleet, n)
        loop = temporal_loop(fleet, n)
        return {"irq": irq, "baseline_batch_reset": batch, "baseline_client_loop": loop}
    finally:
        worker.stop()
        server.stop()


# ------------------------------------------------------------------------------- the kill


def _applied_per_target(journal: str) -> Counter[str]:
    import psycopg

    with psycopg.connect(journal) as conn:
        rows = conn.execute("SELECT target, COUNT(*) FROM commands WHERE action='retry' AND"
                            " status='applied' GROUP BY target").fetchall()
    return Counter({str(t): int(c) for t, c in rows})


def kill_phase(work: Path, n: int, rate: float) -> dict[str, Any]:
    from dbos import DBOSClient

    with dbos_agent(work / "dbos-kill", n, "kill") as (db, counts), \
            postgres_journal() as journal:
        gws = [GatewayProcess(work / name, [dbos_url(db)], name=name, journal=journal)
               for name in ("gw-a", "gw-b")]
        tokens = {gw.name: make_tokens(gw.home)["operator"][0] for gw in gws}
        for gw in gws:
            gw.start()
        try:
            a, b = gws
            asyncio.run(failed_in_view(a, tokens[a.name], "dbos", n))
            code, out, err, _, _ = run_cli(
                ["retry", "--filter", "state:failed", "--yes", "--detach", "--rate",
                 f"{rate:g}/s", "--max", str(n), "--reason", "bench: kill", "-o", "json"],
                irq_env(a, tokens[a.name], work / "cli"))
            if code != 0:
                raise SystemExit(f"irq retry exited {code}:\n{out}\n{err}")
            job_id = json.loads(out)["id"]
            half = asyncio.run(follow_job(a, tokens[a.name], job_id,
                                          lambda j: bool(j["driven_by"]) and j["done"] >= 1))
            driver = next(gw for gw in gws if gw.name == half["driven_by"])
            peer = next(gw for gw in gws if gw is not driver)
            at_kill = asyncio.run(follow_job(peer, tokens[peer.name], job_id,
                                             lambda j: j["done"] >= n // 2))
            driver.kill()
            killed_at = time.monotonic()
            taken = asyncio.run(follow_job(peer, tokens[peer.name], job_id,
                                           lambda j: j["driven_by"] == peer.name))
            takeover_s = time.monotonic() - killed_at
            job = asyncio.run(follow_job(peer, tokens[peer.name], job_id,
                                         lambda j: j["state"] != "running"))
            finish_s = time.monotonic() - killed_at
            wait_for(lambda: counts.published("kill") >= n, 600, "every retried run")
            applied = _applied_per_target(journal)
        finally:
            for gw in gws:
                gw.stop()
        client = DBOSClient(system_database_url=f"sqlite:///{db}")
        try:
            forks = Counter(str(wf.forked_from) for wf in client.list_workflows(
                is_fork=True, load_input=False, load_output=False))
        finally:
            client.destroy()
    per_run = counts.per_run("kill")
    expected = Counter({"fetch_data": 1, "transform": 1, "publish": 2, "published": 1})
    wrong = sorted(name for name, c in per_run.items() if c != expected)
    return {
        "runs": n, "rate_per_s": rate, "journal": "postgresql", "gateways": 2,
        "killed": driver.name, "finished_by": peer.name,
        "done_at_kill": at_kill["done"], "done_when_peer_took_over": taken["done"],
        "takeover_s": round(takeover_s, 2), "kill_to_job_done_s": round(finish_s, 2),
        "job": {k: job[k] for k in ("targets", "done", "failed", "takeovers", "state")},
        "runs_checked": len(per_run),
        "runs_whose_third_step_ran_other_than_twice": len(
            [c for c in per_run.values() if c["publish"] != 2]),
        "runs_with_wrong_counts": wrong[:10],
        "targets_applied_once_in_journal": sum(1 for c in applied.values() if c == 1),
        "targets_applied_more_than_once": sum(1 for c in applied.values() if c > 1),
        "forks_per_run_max": max(forks.values(), default=0), "forks": sum(forks.values()),
        "none_retried_twice": not wrong and len(per_run) == n and len(applied) == n
        and max(applied.values(), default=0) == 1 and max(forks.values(), default=0) == 1,
    }


# ---------------------------------------------------------------------------------- main


def table(result: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = []
    for backend in ("dbos", "temporal"):
        got = result.get(backend)
        if not got:
            continue
        irq = got["irq"]
        rows.append((f"{backend}: irq retry --filter (job)",
                     f"confirmed in {irq['confirmation_s']} s (CLI CPU {irq['cli_cpu_s']} s), "
                     f"job {irq['job_runtime_s']} s = {irq['job_runs_per_s']} runs/s, all "
                     f"completed {irq['all_completed_s']} s = "
                     f"{irq['runs_per_s_to_completed']} runs/s, failed {irq['failed']}"))
        for key, base in got.items():
            if key == "irq":
                continue
            took = base.get("loop_s", base.get("batch_job_s"))
            rows.append((f"{backend}: {key}",
                         f"issued in {took} s, all completed {base['all_completed_s']} s = "
                         f"{base['runs_per_s_to_completed']} runs/s; executions "
                         f"{base['executions']}"))
        rows.append((f"{backend}: irq executions", str(irq["executions"])))
    kill = result.get("kill")
    if kill:
        rows.append(("kill: driver SIGKILLed halfway",
                     f"{kill['killed']} killed at {kill['done_at_kill']} done; "
                     f"{kill['finished_by']} took over in {kill['takeover_s']} s, job done "
                     f"{kill['kill_to_job_done_s']} s after the kill; none retried twice: "
                     f"{kill['none_retried_twice']}"))
    width = max(len(r[0]) for r in rows)
    print(f"bulk retry of {result['runs']} failed runs per approach")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0, help="the job's rate (runs/s)")
    parser.add_argument("--kill-rate", type=float, default=100.0,
                        help="the kill phase's rate (slow enough to kill it halfway)")
    parser.add_argument("--only", choices=("dbos", "temporal", "kill"), action="append")
    parser.add_argument("--out", default="bulk_retry", help="results/NAME.json")
    args = parser.parse_args()
    phases = args.only or ["dbos", "temporal", "kill"]
    began = time.monotonic()
    result: dict[str, Any] = {"runs": args.runs, "rate_per_s": args.rate,
                              "backend_params": {"dbos": DBOS_PARAMS,
                                                 "temporal": TEMPORAL_PARAMS}}
    with tempfile.TemporaryDirectory(prefix="irq-bulk-retry-") as tmp:
        work = Path(tmp)
        if "dbos" in phases:
            result["dbos"] = {"irq": dbos_irq(work, args.runs, args.rate),
                              "baseline_client_loop": dbos_baseline(work, args.runs)}
            print(f"  dbos: {json.dumps(result['dbos'])}", file=sys.stderr)
        if "temporal" in phases:
            result["temporal"] = temporal_phases(work, args.runs, args.rate)
            print(f"  temporal: {json.dumps(result['temporal'])}", file=sys.stderr)
        if "kill" in phases:
            result["kill"] = kill_phase(work, args.runs, args.kill_rate)
    result["versions"] = {
        "dbos": importlib.metadata.version("dbos"),
        "temporalio": importlib.metadata.version("temporalio"),
        "temporal_cli": subprocess.run([temporal_cli(), "--version"], capture_output=True,
                                       text=True, check=False).stdout.strip(),
        "database": "DBOS on SQLite; kill phase journal on PostgreSQL (pgserver)",
    }
    result["total_s"] = round(time.monotonic() - began, 1)
    table(result)
    write_results(args.out, result)


if __name__ == "__main__":
    try:
        main()
    except GatewayError as exc:
        raise SystemExit(f"gateway error: {exc}") from None
