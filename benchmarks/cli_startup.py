"""Cold start of the command line: ``irq --help``, ``irq --version`` and ``irq runs -o json``
against a live gateway holding N runs (default 10,000), next to the interpreter's own floor.

    .venv/bin/python benchmarks/cli_startup.py [--runs 10000] [--repeat 7]

Every figure is the wall time of a fresh process (``subprocess.run`` from fork to exit, output
read to the end), median and p90 of ``--repeat`` runs (at least 5), and its CPU time (user +
system, median): wall time stretches with whatever else runs on the machine, so the 1-minute
load average is recorded too. "Cold" means a new interpreter each time; the OS page cache and
the ``.pyc`` files are warm, as they are for an operator who typed ``irq`` a minute ago. The
baselines are ``python -c pass`` and ``python -c "import typer"`` in the same venv: what no
command-line tool written with typer can go below.

``irq runs -o json`` is then taken apart, phase by phase, in fresh processes running this
checkout's code (imports, the gateway's snapshot, decoding, pydantic validation, ``contract()``,
encoding), to show what dominates it.

The gateway is the one ``irq serve`` runs (``console.gateway.server.Gateway``) in its own
process, with the synthetic backend of ``benchmarks/gateway_heartbeats.py`` reporting N
running runs (no adapter is measured here), and a viewer token; ``irq`` reaches it through
``IRQ_URL``/``IRQ_TOKEN`` with an empty ``IRQ_HOME``.

Prints a table and writes ``benchmarks/results/cli.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

GOAL_S = 0.3
BIN = Path(sys.executable).parent


def _serve(port: int, home: str, runs: int) -> None:
    """The gateway ``irq serve`` runs, with ``runs`` synthetic running runs."""
    from gateway_heartbeats import SyntheticBackend

    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings

    async def main() -> None:
        gw = Gateway(GatewaySettings(port=port, home=Path(home)))
        gw.add_backend("bench:local", SyntheticBackend(runs))  # type: ignore[arg-type]
        await gw.start()
        await asyncio.Event().wait()

    asyncio.run(main())


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p90 of 7 samples is the 7th smallest, of 10 the 9th)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(
    argv: list[str], env: dict[str, str], repeat: int
) -> tuple[list[float], list[float], int, bytes]:
    """Wall and CPU (user + system) seconds of ``repeat`` fresh processes, after one untimed
    warm-up run (which also writes the .pyc files). CPU time is what the process itself
    needed: it stretches far less than wall time when other work shares the machine."""
    subprocess.run(argv, env=env, capture_output=True, check=False)
    walls: list[float] = []
    cpus: list[float] = []
    code, out = 0, b""
    for _ in range(repeat):
        cpu = _cpu_of_children()
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu_of_children() - cpu)
        code, out = done.returncode, done.stdout
    return walls, cpus, code, out


def _wait_for_runs(irq: list[str], env: dict[str, str], runs: int) -> None:
    """Until ``irq runs -o json`` lists all ``runs`` (the first poll of the backend)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = subprocess.run([*irq, "runs", "-o", "json"], env=env, capture_output=True)
        if done.returncode == 0 and len(json.loads(done.stdout)) == runs:
            return
        time.sleep(0.5)
    raise SystemExit(f"the gateway did not list {runs} runs within 60 s")


def _phases_child() -> None:
    """``irq runs -o json`` step by step in this process (the code the command runs, timed
    between its steps); prints one JSON object of seconds."""
    marks = {"start": time.perf_counter()}
    import console.cli.app  # noqa: F401 - what `irq` loads before it parses the command line
    import console.client as client_module
    from console.cli.output import dumps
    from console.cli.session import with_gateway
    from console.client import GatewayClient
    from console.config import resolve_connection

    marks["imported"] = time.perf_counter()
    spent = {"decode": 0.0, "connected": 0.0}
    real_decode = client_module.decode_frame

    def timed_decode(raw: Any) -> Any:
        start = time.perf_counter()
        try:
            return real_decode(raw)
        finally:
            spent["decode"] += time.perf_counter() - start

    client_module.decode_frame = timed_decode  # type: ignore[assignment]

    async def fetch(client: GatewayClient) -> Any:
        spent["connected"] = time.perf_counter()
        return await client.query("runs")

    listing = with_gateway(resolve_connection(), fetch, snapshot=False)
    marks["fetched"] = time.perf_counter()
    runs = listing["runs"]
    fields = listing.get("fields")
    if fields:  # as console/cli/runs.py prints them: in the contract's key order
        runs = [{k: c[k] for k in fields} for c in runs]
    text = dumps(runs, indent=2, decoded_json=True)
    marks["encoded"] = time.perf_counter()
    with open(os.devnull, "w") as sink:
        sink.write(text + "\n")
    marks["written"] = time.perf_counter()
    print(json.dumps({
        "import": marks["imported"] - marks["start"],
        "connect": spent["connected"] - marks["imported"],
        "gateway_listing": marks["fetched"] - spent["connected"] - spent["decode"],
        "decode_json": spent["decode"],
        "encode_json": marks["encoded"] - marks["fetched"],
        "write": marks["written"] - marks["encoded"],
    }))


#: what each phase of ``irq runs -o json`` is (the table's words)
PHASES = {
    "interpreter": "python start-up (python -c pass)",
    "import": "imports (typer, the CLI, client, pydantic models, websockets)",
    "connect": "connect + hello until the welcome (no snapshot: a one-shot listing)",
    "gateway_listing": "query runs: the gateway filters, joins cached contracts, sends",
    "decode_json": "decode the listing JSON (client, orjson)",
    "encode_json": "contract key order, encode the JSON document (indented, terminal-safe)",
    "write": "write it",
}


def _phases(env: dict[str, str], repeat: int) -> dict[str, float]:
    """Median seconds of each phase over ``repeat`` fresh processes (this checkout's code)."""
    code = f"import sys; sys.path[:0] = {[str(ROOT), str(ROOT / 'benchmarks')]!r}; " \
        "import cli_startup; cli_startup._phases_child()"
    runs: list[dict[str, float]] = []
    for _ in range(repeat):
        done = subprocess.run([str(BIN / "python"), "-c", code], env=env, capture_output=True,
                              text=True, check=True)
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    return {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7, help="cold runs per command (>= 5)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cli.json")
    ap.add_argument("--irq", default=str(BIN / "irq"),
                    help="the irq command to time (default: this venv's console script); e.g. "
                    "'python /tmp/old/irq_main.py' for a checkout of another commit")
    args = ap.parse_args()
    if args.repeat < 5:
        ap.error("--repeat must be at least 5")

    from console.gateway.auth import create_token
    from console.model import Role
    from console.processes import free_port

    home = tempfile.mkdtemp(prefix="irq-bench-cli-gw-")
    cli_home = tempfile.mkdtemp(prefix="irq-bench-cli-")
    token = create_token(Role.VIEWER, "bench-cli", Path(home))
    port = free_port()
    gateway = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(port, home, args.runs), daemon=True)
    gateway.start()
    for _ in range(400):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("IRQ_", "PYTHON"))}
    env.update(IRQ_HOME=cli_home, IRQ_URL=f"ws://127.0.0.1:{port}", IRQ_TOKEN=token,
               NO_COLOR="1", COLUMNS="100")
    python = str(BIN / "python")
    irq = shlex.split(args.irq)
    try:
        _wait_for_runs(irq, env, args.runs)
        cases: list[tuple[str, str, list[str], bool]] = [
            ("python_pass", "python -c pass", [python, "-c", "pass"], False),
            ("import_typer", 'python -c "import typer"', [python, "-c", "import typer"], False),
            ("help", "irq --help", [*irq, "--help"], True),
            ("version", "irq --version", [*irq, "--version"], False),
            ("runs_json", f"irq runs -o json ({args.runs:,} runs)",
             [*irq, "runs", "-o", "json"], True),
        ]
        rows: list[dict[str, Any]] = []
        load_before = os.getloadavg()[0]
        for key, label, argv, goal in cases:
            samples, cpus, code, out = _time(argv, env, args.repeat)
            if code != 0:
                raise SystemExit(f"{label} exited {code}")
            row: dict[str, Any] = {
                "key": key,
                "command": label,
                "median_s": round(statistics.median(samples), 4),
                "p90_s": round(_percentile(samples, 0.9), 4),
                "cpu_median_s": round(statistics.median(cpus), 4),
                "samples_s": [round(s, 4) for s in samples],
                "stdout_bytes": len(out),
            }
            if goal:
                row["under_goal"] = row["median_s"] < GOAL_S
            rows.append(row)
        phases = {"interpreter": rows[0]["median_s"], **_phases(env, args.repeat)}
        load_after = os.getloadavg()[0]
    finally:
        gateway.terminate()
        gateway.join(5)

    print(f"cold starts, {args.repeat} runs each (goal: irq under {GOAL_S} s); "
          f"load average {load_before:.2f} -> {load_after:.2f} on {os.cpu_count()} CPUs")
    print(f"{'command':<34} {'median':>8} {'p90':>8} {'CPU':>8} {'stdout':>11}  goal (wall)")
    for row in rows:
        goal_cell = "" if "under_goal" not in row else "met" if row["under_goal"] else "MISSED"
        print(f"{row['command']:<34} {row['median_s']:>7.3f}s {row['p90_s']:>7.3f}s "
              f"{row['cpu_median_s']:>7.3f}s {row['stdout_bytes']:>10,}B  {goal_cell}")
    print(f"\nirq runs -o json, phase by phase (median of {args.repeat}, this checkout):")
    for key, seconds in phases.items():
        print(f"  {seconds:>7.3f}s  {PHASES[key]}")
    print(f"  {sum(phases.values()):>7.3f}s  sum")
    result = {
        "runs": args.runs,
        "repeat": args.repeat,
        "goal_s": GOAL_S,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "irq": args.irq,
        # other work on the machine stretches wall times: the 1-minute load, before and after
        "loadavg_1m": [round(load_before, 2), round(load_after, 2)],
        "commands": {row.pop("key"): row for row in rows},
        "runs_json_phases_s": phases,
        # when: make bench's scale_table.py refuses a file older than its run
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
