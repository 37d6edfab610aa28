"""TUI under load: 10,000 runs and 1,000 heartbeat events a second, through a real pty.

    python benchmarks/tui_render.py [--runs 10000] [--rate 1000] [--seconds 10]
                                    [--sizes 80x24,200x50] [--profile DIR] [--contend N]

The console runs in a child process on a pseudo-terminal, exactly as over SSH: Textual's
Linux driver, its real output. The child's data source feeds events through the client's own
``FleetView.apply`` in batches every 100 ms, ``rate`` heartbeat events a second, as the
gateway sends them to the console (compact ``beat`` events: id, time, progress), every run
beating on a steady cadence (10,000 runs at 1,000/s: each run every 10 s, its
``heartbeat_interval_s``; the snapshot's last beats are laid out along the round robin, so no
run turns late unless the feed falls behind). The parent reads the terminal and reports:

- frames (screen updates) per second, counted by the synchronized-output brackets Textual
  writes once the terminal says it supports them (the parent answers that query);
- batches applied per second (the app's coalesced redraws; designed to stay <= 10);
- key-press-to-screen latency, p50/p95: from writing a key to the pty until the text it
  changes appears in the output (``s`` re-sorts 10,000 rows; ``?`` opens help);
- CPU of the child (user+system seconds per wall second), resident memory (peak);
- bytes written to the terminal per second.

``--contend N`` measures under load on purpose: the child is pinned to one CPU with ``N``
busy-looping processes beside it (so it gets at most ``1/(N+1)`` of that core, as on a
machine whose load average is about ``2 * (N+1)``), for the whole measurement; the results
file records ``contend``. Without it the load is whatever else the machine runs.

Each terminal size runs in its own child, one after the other; the figures of every size go
to ``benchmarks/results/tui.json`` (``--out``). ``--profile DIR`` runs each child under
pyinstrument (the dev extra) and writes ``DIR/tui-COLSxROWS.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import random
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYNC_QUERY = b"\x1b[?2026$p"
SYNC_REPLY = b"\x1b[?2026;2$y"
FRAME_START = b"\x1b[?2026h"


# ------------------------------------------------------------------------------ the child


def child_main(runs: int, rate: int, stats_path: Path, profile: Path | None = None) -> None:
    from console.client import ConnectionStatus, FleetView, GatewayError
    from console.model import Resource, Run, RunState, utcnow
    from console.tui.app import IrqApp

    class LoadSource:
        """10,000 runs, ``rate`` heartbeat events a second through FleetView.apply."""

        url = "bench"
        role = "operator"
        identity = "bench"

        def __init__(self) -> None:
            self.view = FleetView()
            self.seq = 0
            self.events = 0
            self.cadence = runs / rate  # seconds between two beats of one run
            rng = random.Random(7)
            now = utcnow()
            self.contracts: dict[str, dict[str, Any]] = {}
            for i in range(runs):
                run = Run(id=f"dbos:bench/agent-{i:05d}", backend="dbos", context="bench",
                          native_id=f"agent-{i:05d}", name=f"agent {i}",
                          state=RunState.PAUSED if i % 50 == 0 else RunState.RUNNING,
                          heartbeat_at=now, heartbeat_interval_s=self.cadence,
                          heartbeat_timeout_s=6 * self.cadence,
                          progress=rng.random(), in_flight_step="step",
                          resources=[Resource(id=f"gpu-{i % 64}", kind="gpu")])
                self.contracts[run.id] = run.contract()
            self.ids = list(self.contracts)

        async def run(self, on_update: Any, on_status: Any) -> None:
            # The last beats are laid out so the round robin keeps every run on its cadence:
            # agent-00000 beats first, so it beat longest ago (a whole cadence); the last
            # agent beat just now. No run turns late unless the feed falls behind.
            start = utcnow()
            for i, rid in enumerate(self.ids):
                at = start - timedelta(seconds=self.cadence * (1 - i / len(self.ids)))
                self.contracts[rid]["heartbeat_at"] = at.isoformat()
            self.view.load_snapshot({"epoch": "bench", "seq": 0, "interrupts": [],
                                     "backends": [], "runs": list(self.contracts.values())})
            on_status(ConnectionStatus("live", "bench"))
            on_update(self.view, [{"kind": "snapshot", "seq": 0}])
            per_batch = max(1, rate // 10)
            cursor = 0
            loop = asyncio.get_running_loop()
            next_at = loop.time()
            while True:
                next_at += 0.1
                await asyncio.sleep(max(0.0, next_at - loop.time()))
                now = utcnow().isoformat()
                applied = []
                batch = [self.ids[(cursor + k) % len(self.ids)] for k in range(per_batch)]
                cursor = (cursor + per_batch) % len(self.ids)
                for rid in batch:  # every run beats on its cadence (round robin)
                    # as the gateway sends the console a beat that moved only the heartbeat
                    # time and progress: a compact ``beat`` event (fleet_source.py)
                    contract = self.contracts[rid]
                    contract["progress"] = min(1.0, (contract["progress"] or 0) + 0.001)
                    self.seq += 1
                    event = {"seq": self.seq, "kind": "beat", "data": {
                        "id": rid, "heartbeat_at": now, "progress": contract["progress"]}}
                    if self.view.apply(event):
                        applied.append(event)
                self.events += len(applied)
                on_update(self.view, applied)

        def stop(self) -> None:
            pass

        async def command(self, *args: Any, **kwargs: Any) -> Any:
            raise GatewayError("benchmark: no gateway", "unsupported")

        async def query(self, *args: Any, **kwargs: Any) -> Any:
            raise GatewayError("benchmark: no gateway", "unsupported")

        async def ping(self) -> float | None:
            return None

    source = LoadSource()
    app = IrqApp(source, context="bench")  # type: ignore[arg-type]
    started = time.monotonic()
    profiler: Any = None
    if profile is not None:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001, async_mode="disabled")
        profiler.start()
    try:
        app.run(mouse=False)
    finally:
        if profiler is not None:
            profiler.stop()
            profile.write_text(profiler.output_text(unicode=False, color=False,
                                                    show_all=False))
            profiler.last_session.save(str(profile.with_suffix(".pyisession")))
        stats_path.write_text(json.dumps({
            "batches_applied": app.redraws,
            "flushes_deferred": getattr(getattr(app, "key_first", None), "deferred", 0),
            "events": source.events,
            "seconds": time.monotonic() - started,
        }))


# ----------------------------------------------------------------------------- the parent


class Terminal:
    """The parent's side of the pty: reads output, answers the sync-output query."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.total = 0
        self.frames = 0
        self.answered = False

    def pump(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return b""
        self.total += len(data)
        self.frames += data.count(FRAME_START)
        if not self.answered and SYNC_QUERY in data:
            os.write(self.fd, SYNC_REPLY)
            self.answered = True
        self.buffer += data
        del self.buffer[:-200_000]
        return data

    def run_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.pump(min(left, 0.05))

    def press_and_wait(self, key: bytes, expect: bytes, timeout: float = 5.0) -> float:
        """Seconds from writing ``key`` until ``expect`` shows up in the output."""
        self.buffer.clear()
        start = time.perf_counter()
        os.write(self.fd, key)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.01)
            if expect in self.buffer:
                return time.perf_counter() - start
        raise RuntimeError(f"{expect!r} did not appear within {timeout}s")


def proc_stats(pid: int) -> tuple[float, int, int]:
    """(cpu seconds, rss kB, peak rss kB) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1])
    return cpu, rss, peak


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure(args: argparse.Namespace, cols: int, rows: int) -> dict[str, Any]:
    """One child on a ``cols`` x ``rows`` pty: steady state, then the key presses."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    stats_path = Path(tempfile.mkstemp(prefix="irq-bench-", suffix=".json")[1])
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("NO_COLOR", None)
    command = [sys.executable, __file__, "--child", "--runs", str(args.runs), "--rate",
               str(args.rate), "--stats", str(stats_path)]
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        command += ["--profile-file", str(args.profile / f"tui-{cols}x{rows}.txt")]
    child = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
        close_fds=True)
    os.close(slave)
    from console.tui.run_rows import SORT_CYCLE

    sort_order = [key.value for key in SORT_CYCLE]  # `s` walks the app's own cycle
    hogs: list[subprocess.Popen[bytes]] = []
    if args.contend:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(child.pid, {cpu})
        for _ in range(args.contend):
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            os.sched_setaffinity(hogs[-1].pid, {cpu})
    term = Terminal(master)
    try:
        term.press_and_wait(b"", b"sort attention", timeout=60)  # first full screen
        term.run_for(3.0)  # warm up
        cpu0, _, _ = proc_stats(child.pid)
        bytes0, frames0, t0 = term.total, term.frames, time.monotonic()
        term.run_for(args.seconds)
        elapsed = time.monotonic() - t0
        cpu1, rss, peak = proc_stats(child.pid)
        steady = {
            "bytes_per_s": (term.total - bytes0) / elapsed,
            "frames_per_s": (term.frames - frames0) / elapsed,
            "cpu": (cpu1 - cpu0) / elapsed,
            "rss_mb": rss / 1024,
            "peak_rss_mb": peak / 1024,
        }
        sort_lat: list[float] = []
        for i in range(1, args.presses + 1):
            nxt = sort_order[i % len(sort_order)]
            sort_lat.append(term.press_and_wait(b"s", f"sort {nxt}".encode()))
            term.run_for(0.3)
        help_lat: list[float] = []
        for _ in range(max(3, args.presses // 3)):
            help_lat.append(term.press_and_wait(b"?", b"Keys: fleet"))
            term.run_for(0.3)
            # back on the fleet: the summary's count (the help itself says "sort "); then a
            # pause, so the next '?' cannot reach a help screen still closing
            term.press_and_wait(b"\x1b", f"{args.runs}/{args.runs}".encode())
            term.run_for(1.0)
        os.write(master, b"\x11")  # ctrl+q
        deadline = time.monotonic() + 30
        while child.poll() is None and time.monotonic() < deadline:
            term.pump(0.05)  # keep reading: a child blocked writing to a full pty never exits
        child.wait(1)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(5)
        if child.poll() is None:
            child.kill()
            child.wait(5)
        os.close(master)
    app_stats = json.loads(stats_path.read_text() or "{}")
    stats_path.unlink(missing_ok=True)
    keys = sort_lat + help_lat
    return {
        "size": f"{cols}x{rows}",
        "events_per_s": app_stats["events"] / app_stats["seconds"],
        "batches_per_s": app_stats["batches_applied"] / app_stats["seconds"],
        "flushes_deferred_for_keys": app_stats.get("flushes_deferred", 0),
        "frames_per_s": steady["frames_per_s"],
        "bytes_per_s": steady["bytes_per_s"],
        "kib_per_s": steady["bytes_per_s"] / 1024,
        "cpu_percent": steady["cpu"] * 100,
        "rss_mb": steady["rss_mb"],
        "peak_rss_mb": steady["peak_rss_mb"],
        "key_p50_ms": statistics.median(keys) * 1000,
        "key_p95_ms": percentile(keys, 0.95) * 1000,
        "sort_p50_ms": statistics.median(sort_lat) * 1000,
        "sort_p95_ms": percentile(sort_lat, 0.95) * 1000,
        "help_p50_ms": statistics.median(help_lat) * 1000,
        "help_p95_ms": percentile(help_lat, 0.95) * 1000,
        "key_presses": len(keys),
    }


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    print(f"irq TUI benchmark: {args.runs} runs, {args.rate} heartbeat events/s, "
          f"{r['size']} pty, {args.seconds:g}s steady state"
          + (f", pinned beside {args.contend} busy loops" if args.contend else ""))
    print(f"  events applied by the client   {r['events_per_s']:.0f}/s")
    print(f"  batches applied (redraws)      {r['batches_per_s']:.1f}/s (designed cap: 10/s)")
    print(f"  terminal frames                {r['frames_per_s']:.1f}/s")
    print(f"  bytes to the terminal          {r['kib_per_s']:.1f} KiB/s")
    print(f"  CPU (child)                    {r['cpu_percent']:.0f}% of one core")
    print(f"  memory (child)                 {r['rss_mb']:.0f} MiB RSS, "
          f"peak {r['peak_rss_mb']:.0f} MiB")
    print(f"  key->screen, s (sort 10k rows) p50 {r['sort_p50_ms']:.0f} ms, "
          f"p95 {r['sort_p95_ms']:.0f} ms")
    print(f"  key->screen, ? (open help)     p50 {r['help_p50_ms']:.0f} ms, "
          f"p95 {r['help_p95_ms']:.0f} ms")
    print(f"  key->screen, all keys          p50 {r['key_p50_ms']:.0f} ms, "
          f"p95 {r['key_p95_ms']:.0f} ms (n={r['key_presses']})")


def parent_main(args: argparse.Namespace) -> int:
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    load_start = os.getloadavg()[:2]  # other work on the machine inflates key latencies
    results = []
    for cols, rows in sizes:
        result = measure(args, cols, rows)
        report(args, result)
        results.append(result)
    goals = {"80x24": 20.0, "200x50": 40.0}
    print()
    print(f"  {'size':<8} {'KiB/s':>7} {'goal':>6} {'key p50':>8} {'key p95':>8}  (goal p95 < 100 ms)")
    for r in results:
        goal = goals.get(r["size"])
        print(f"  {r['size']:<8} {r['kib_per_s']:>7.1f} "
              f"{(f'<= {goal:g}' if goal else '-'):>6} {r['key_p50_ms']:>6.0f}ms "
              f"{r['key_p95_ms']:>6.0f}ms")
    load1, load5, _ = os.getloadavg()
    document = {
        "benchmark": "tui_render",
        "runs": args.runs,
        "rate_per_s": args.rate,
        "seconds": args.seconds,
        "contend": args.contend,
        "cpus": os.cpu_count(),
        "load_average_1m_5m": {"start": [round(v, 2) for v in load_start],
                               "end": [round(load1, 2), round(load5, 2)]},
        "sizes": {r["size"]: r for r in results},
        # when: make bench's scale_table.py refuses a file older than its run
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"  written to {args.out} (load average 1/5 min: {load_start[0]:.2f}/"
          f"{load_start[1]:.2f} at the start, {load1:.2f}/{load5:.2f} at the end)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--sizes", default="80x24,200x50",
                        help="terminal sizes, COLSxROWS, comma-separated")
    parser.add_argument("--size", dest="sizes", help="one terminal size (same as --sizes)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tui.json")
    parser.add_argument("--contend", type=int, default=0,
                        help="pin the TUI to one CPU beside N busy loops (load on purpose)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write a pyinstrument profile of each child into this folder")
    parser.add_argument("--profile-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stats", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.runs, args.rate, args.stats, args.profile_file)
        return 0
    return parent_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
