"""The chaos suite (``make chaos``): fuzzed frames, connections that never say hello, and a
SIGKILL storm of gateways during decisions and actions against real DBOS and Temporal agents.

Writes ``benchmarks/results/chaos.json`` and prints a table. The scenarios live in
``devtools/chaos/`` (a shorter cut of each runs in ``make test``); nothing is mocked: real
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

from devtools.chaos.freeze import run_freezes, run_postgres_restart  # noqa: E402
from devtools.chaos.fuzz import run_fuzz  # noqa: E402
from devtools.chaos.silent import run_silent  # noqa: E402
from devtools.chaos.storm import run_storm  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "chaos.json"
#: what describes one run of this script rather than a scenario
META = ("started_at", "host", "cpus", "load_avg_at_start", "total_seconds", "load_avg_at_end")


def _journal_choice(requested: str) -> str:
    """postgresql when ``irq serve`` has ``--journal`` (two gateways, one database)."""
    if requested != "auto":
        return requested
    out = subprocess.run([sys.executable, "-m", "console.cli.app", "serve", "--help"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    return "postgresql" if "--journal" in out else "sqlite"


def _items(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


#: (label, value, note) of each table row, from the result; a row whose scenario did not run
#: (KeyError) is left out
ROWS: list[tuple[str, Any, Any]] = [
    ("SIGKILLs of a gateway", lambda r: r["kills"],
     lambda r: f"{r['gateways']} gateway(s), {r['journal']} journal"),
    ("decisions applied", lambda r: r["decisions"], lambda r: _items(r["decisions_by_backend"])),
    ("decisions lost (agents' records)", lambda r: r["lost"], lambda r: "must be 0"),
    ("decisions doubled (agents' records)", lambda r: r["doubled"], lambda r: "must be 0"),
    ("re-sent with the same key", lambda r: r["decision_retries_same_key"],
     lambda r: f"{r['in_progress_answers']} in_progress answers"),
    ("actions (pause/resume) with an outcome", lambda r: r["actions"],
     lambda r: _items(r["action_outcomes"])),
    ("gateway restart (median / max s)",
     lambda r: f"{r['restart_s_median']} / {r['restart_s_max']}", lambda r: ""),
    ("fuzzed frames", lambda r: r["fuzz_frames"], lambda r: _items(r["fuzz_frames_by_path"])),
    ("gateway crashes", lambda r: r["crashes"], lambda r: "must be 0"),
    ("unanswered pings", lambda r: r["unanswered_pings"], lambda r: f"of {r['fuzz_pings']}"),
    ("error frames without code/message", lambda r: r["fuzz_unclear_errors"],
     lambda r: "must be 0"),
    ("RSS before / warm / after (KiB)",
     lambda r: f"{r['rss_before_kb']} / {r['rss_warm_kb']} / {r['rss_after_kb']}",
     lambda r: f"{r['rss_growth_after_warmup_kb']:+} KiB after warm-up"),
    ("connections that never say hello", lambda r: r["silent_connections"],
     lambda r: _items(r["silent_by_kind"])),
    ("legit connect+snapshot p50 / p95 / max ms",
     lambda r: f"{r['legit_connect_ms_p50']} / {r['legit_connect_ms_p95']} / "
     f"{r['legit_connect_ms_max']}",
     lambda r: f"idle p50 {r['legit_connect_ms_idle_p50']} ms, {r['legit_failures']} failures"),
    ("backend frozen: unreachable shown after s",
     lambda r: r["backend_unreachable_seen_after_s"],
     lambda r: f"frozen {r['backend_frozen_s']} s, reachable {r['backend_reachable_again_after_s']}"
     f" s after the thaw; lost {r['backend_freeze_lost']}, doubled "
     f"{r['backend_freeze_doubled']}"),
    ("PostgreSQL restarted: decision after", lambda r: r["decision_after_postgres_restart"],
     lambda r: f"down {r['postgres_down_s']} s; gateway survived "
     f"{r['gateway_survived_postgres_restart']}; lost {r['postgres_restart_lost']}, doubled "
     f"{r['postgres_restart_doubled']}"),
    ("gateway frozen: agents' beats back after s", lambda r: r["agents_back_after_s"],
     lambda r: f"frozen {r['gateway_frozen_s']} s; lost {r['gateway_freeze_lost']}, doubled "
     f"{r['gateway_freeze_doubled']}"),
]


def _table(result: dict[str, Any]) -> str:
    rows = []
    for label, value, note in ROWS:
        try:
            rows.append((label, value(result), note(result)))
        except KeyError:
            continue
    width = max((len(r[0]) for r in rows), default=0)
    vwidth = max((len(str(r[1])) for r in rows), default=0)
    return "\n".join(f"{name:<{width}}  {value!s:>{vwidth}}  {note}" for name, value, note in rows)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="irq-chaos-"))
    os.chmod(work, 0o755)  # the PostgreSQL server runs as nobody under it
    began = time.monotonic()
    result: dict[str, Any] = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "host": platform.node(), "cpus": os.cpu_count(),
                              "load_avg_at_start": [round(x, 1) for x in os.getloadavg()]}
    scenarios = set(args.scenarios.split(","))
    journal = _journal_choice(args.journal)
    runs: list[tuple[str, str, Any]] = [
        ("fuzz", f"{args.fuzz_frames} frames",
         lambda: run_fuzz(work, frames=args.fuzz_frames)),
        ("silent", f"{args.squatters} connections that never say hello",
         lambda: run_silent(work, squatters=args.squatters)),
        ("freeze", "Temporal dev server SIGSTOPped 15 s, gateway SIGSTOPped 25 s",
         lambda: run_freezes(work)),
        ("pgrestart", "the journal's PostgreSQL stopped 5 s while a decision is sent",
         lambda: run_postgres_restart(work)),
        ("storm", f"{args.kills} SIGKILLs ({journal} journal)",
         lambda: run_storm(work / "storm", kills=args.kills, journal=journal,
                           max_storm_s=args.max_storm_s)),
    ]
    try:
        for name, what, run in runs:
            if name not in scenarios:
                continue
            print(f"{name}: {what} ...", flush=True)
            t0 = time.monotonic()
            try:
                result.update((await run()).as_dict())
            except Exception as exc:  # keep the other scenarios' figures; exit 1 below
                result[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[-2000:]
            result[f"{name}_seconds"] = round(time.monotonic() - t0, 1)
        if "storm" in scenarios:
            result["kills_target"] = args.kills
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["total_seconds"] = round(time.monotonic() - began, 1)
    result["load_avg_at_end"] = [round(x, 1) for x in os.getloadavg()]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--fuzz-frames", type=int, default=100_000)
    parser.add_argument("--squatters", type=int, default=500)
    parser.add_argument("--journal", choices=["auto", "postgresql", "sqlite"], default="auto")
    parser.add_argument("--max-storm-s", type=float, default=540.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--scenarios", default="fuzz,silent,freeze,pgrestart,storm",
                        help="comma-separated subset of fuzz,silent,freeze,pgrestart,storm")
    parser.add_argument("--merge", action="store_true",
                        help="update the figures of these scenarios in an existing --out file")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    if args.merge and args.out.exists():  # the earlier run's header stays; this one is listed
        earlier = json.loads(args.out.read_text())
        header = {k: result.pop(k) for k in META}
        header["scenarios"] = args.scenarios
        result = {**earlier, **result,
                  "merged_runs": [*earlier.get("merged_runs", []), header]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(_table(result))
    print(f"wrote {args.out} ({result['total_seconds']} s)")
    bad = any(result.get(k) for k in (
        "lost", "doubled", "crashes", "unanswered_pings", "fuzz_unclear_errors",
        "legit_failures", "bystander_unanswered", "bystander_closed", "gave_up",
        "backend_freeze_lost", "backend_freeze_doubled", "gateway_freeze_lost",
        "gateway_freeze_doubled", "postgres_restart_lost", "postgres_restart_doubled")) or any(
        k.endswith("_error") for k in result) or result.get(
        "gateway_survived_postgres_restart") is False
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
