"""The chaos suite (``make chaos``): fuzzed frames, connections that never say hello, and a
SIGKILL storm of gateways during decisions and actions against real DBOS and Temporal agents.

Writes ``benchmarks/results/chaos.json`` and prints a table. The scenarios live in
``tests/chaos/`` (a shorter cut of each runs in ``make test``); nothing is mocked: real
``irq serve`` processes, a real PostgreSQL (pgserver wheel) for the shared journal, a real
Temporal dev server, real DBOS agents on SQLite.

    python benchmarks/chaos.py [--kills 100] [--fuzz-frames 100000] [--squatters 500]
                               [--journal postgresql|sqlite] [--max-storm-s 600]

``--max-storm-s`` bounds the storm on a loaded machine: it stops after that many seconds even
if fewer kills were made, and the JSON says how many were.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chaos.fuzz import run_fuzz  # noqa: E402
from tests.chaos.silent import run_silent  # noqa: E402
from tests.chaos.storm import run_storm  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "chaos.json"


def _journal_choice(requested: str) -> str:
    """postgresql when ``irq serve`` has ``--journal`` (two gateways, one database)."""
    if requested != "auto":
        return requested
    out = subprocess.run([sys.executable, "-m", "console.cli.app", "serve", "--help"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    return "postgresql" if "--journal" in out else "sqlite"


def _table(result: dict[str, Any]) -> str:
    rows = [
        ("SIGKILLs of a gateway", result["kills"],
         f"{result['gateways']} gateway(s), {result['journal']} journal"),
        ("decisions applied", result["decisions"],
         ", ".join(f"{k} {v}" for k, v in result["decisions_by_backend"].items())),
        ("decisions lost (agents' records)", result["lost"], "must be 0"),
        ("decisions doubled (agents' records)", result["doubled"], "must be 0"),
        ("re-sent with the same key", result["decision_retries_same_key"],
         f"{result['in_progress_answers']} in_progress answers"),
        ("actions (pause/resume) with an outcome", result["actions"],
         ", ".join(f"{k} {v}" for k, v in result["action_outcomes"].items())),
        ("gateway restart (median / max s)",
         f"{result['restart_s_median']} / {result['restart_s_max']}", ""),
        ("fuzzed frames", result["fuzz_frames"],
         ", ".join(f"{k} {v}" for k, v in result["fuzz_frames_by_path"].items())),
        ("gateway crashes", result["crashes"], "must be 0"),
        ("unanswered pings", result["unanswered_pings"], f"of {result['fuzz_pings']}"),
        ("error frames without code/message", result["fuzz_unclear_errors"], "must be 0"),
        ("RSS before / warm / after (KiB)",
         f"{result['rss_before_kb']} / {result['rss_warm_kb']} / {result['rss_after_kb']}",
         f"{result['rss_growth_after_warmup_kb']:+} KiB after warm-up"),
        ("connections that never say hello", result["silent_connections"],
         ", ".join(f"{k} {v}" for k, v in result["silent_by_kind"].items())),
        ("legit connect+snapshot p50 / p95 / max ms",
         f"{result['legit_connect_ms_p50']} / {result['legit_connect_ms_p95']} / "
         f"{result['legit_connect_ms_max']}",
         f"idle p50 {result['legit_connect_ms_idle_p50']} ms, "
         f"{result['legit_failures']} failures"),
    ]
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(str(r[1])) for r in rows)
    return "\n".join(f"{name:<{width}}  {value!s:>{vwidth}}  {note}" for name, value, note in rows)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="irq-chaos-"))
    os.chmod(work, 0o755)  # the PostgreSQL server runs as nobody under it
    began = time.monotonic()
    result: dict[str, Any] = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "host": platform.node(), "cpus": os.cpu_count(),
                              "load_avg_at_start": [round(x, 1) for x in os.getloadavg()]}
    try:
        print(f"fuzz: {args.fuzz_frames} frames ...", flush=True)
        result.update((await run_fuzz(work, frames=args.fuzz_frames)).as_dict())
        print(f"silent: {args.squatters} connections that never say hello ...", flush=True)
        result.update((await run_silent(work, squatters=args.squatters)).as_dict())
        journal = _journal_choice(args.journal)
        print(f"storm: {args.kills} SIGKILLs ({journal} journal) ...", flush=True)
        result.update((await run_storm(work / "storm", kills=args.kills, journal=journal,
                                       max_storm_s=args.max_storm_s)).as_dict())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["kills_target"] = args.kills
    result["total_seconds"] = round(time.monotonic() - began, 1)
    result["load_avg_at_end"] = [round(x, 1) for x in os.getloadavg()]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--fuzz-frames", type=int, default=100_000)
    parser.add_argument("--squatters", type=int, default=500)
    parser.add_argument("--journal", choices=["auto", "postgresql", "sqlite"], default="auto")
    parser.add_argument("--max-storm-s", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(_table(result))
    print(f"wrote {args.out} ({result['total_seconds']} s)")
    bad = (result["lost"] or result["doubled"] or result["crashes"]
           or result["unanswered_pings"] or result["fuzz_unclear_errors"]
           or result["legit_failures"] or result["bystander_unanswered"]
           or result["bystander_closed"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
