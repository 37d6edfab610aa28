"""TUI under load: 10,000 runs and 1,000 heartbeat events a second, through a real pty.

    python benchmarks/tui_render.py [--runs 10000] [--rate 1000] [--seconds 10] [--size 200x50]

The console runs in a child process on a pseudo-terminal, exactly as over SSH: Textual's
Linux driver, its real output. The child's data source feeds events through the client's own
``FleetView.apply`` (JSON contract -> pydantic, as from the gateway) in batches every 100 ms,
``rate`` heartbeat events a second, every run beating on a steady cadence (10,000 runs at
1,000/s: each run every 10 s, its ``heartbeat_interval_s``). The parent reads the terminal and
reports:

- frames (screen updates) per second, counted by the synchronized-output brackets Textual
  writes once the terminal says it supports them (the parent answers that query);
- batches applied per second (the app's coalesced redraws; designed to stay <= 10);
- key-press-to-screen latency, p50/p95: from writing a key to the pty until the text it
  changes appears in the output (``s`` re-sorts 10,000 rows; ``?`` opens help);
- CPU of the child (user+system seconds per wall second), resident memory (peak);
- bytes written to the terminal per second.
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
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYNC_QUERY = b"\x1b[?2026$p"
SYNC_REPLY = b"\x1b[?2026;2$y"
FRAME_START = b"\x1b[?2026h"
SORT_ORDER = ["attention", "age", "id", "backend", "progress", "updated"]


# ------------------------------------------------------------------------------ the child


def child_main(runs: int, rate: int, stats_path: Path) -> None:
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
            now = utcnow()
            rng = random.Random(7)
            frame: dict[str, Any] = {"epoch": "bench", "seq": 0, "runs": [], "interrupts": [],
                                     "backends": []}
            for i in range(runs):
                run = Run(id=f"dbos:bench/agent-{i:05d}", backend="dbos", context="bench",
                          native_id=f"agent-{i:05d}", name=f"agent {i}",
                          state=RunState.PAUSED if i % 50 == 0 else RunState.RUNNING,
                          heartbeat_at=now - timedelta(seconds=10.0 * (i / runs)),
                          heartbeat_interval_s=10.0, heartbeat_timeout_s=60.0,
                          progress=rng.random(), in_flight_step="step",
                          resources=[Resource(id=f"gpu-{i % 64}", kind="gpu")])
                frame["runs"].append(run.contract())
            self.view.load_snapshot(frame)
            self.contracts = {r["id"]: r for r in frame["runs"]}
            self.ids = list(self.contracts)

        async def run(self, on_update: Any, on_status: Any) -> None:
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
                    data = dict(self.contracts[rid])
                    data["heartbeat_at"] = now
                    data["progress"] = min(1.0, (data["progress"] or 0) + 0.001)
                    self.contracts[rid] = data
                    self.seq += 1
                    event = {"seq": self.seq, "kind": "run", "data": data}
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
    try:
        app.run(mouse=False)
    finally:
        stats_path.write_text(json.dumps({
            "batches_applied": app.redraws,
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


def parent_main(args: argparse.Namespace) -> int:
    cols, rows = (int(v) for v in args.size.split("x"))
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    stats_path = Path(tempfile.mkstemp(prefix="irq-bench-", suffix=".json")[1])
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("NO_COLOR", None)
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", "--runs", str(args.runs), "--rate", str(args.rate),
         "--stats", str(stats_path)],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
        close_fds=True)
    os.close(slave)
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
            nxt = SORT_ORDER[i % len(SORT_ORDER)]
            sort_lat.append(term.press_and_wait(b"s", f"sort {nxt}".encode()))
            term.run_for(0.3)
        help_lat: list[float] = []
        for _ in range(max(3, args.presses // 3)):
            help_lat.append(term.press_and_wait(b"?", b"Keys: fleet"))
            term.run_for(0.3)
            term.press_and_wait(b"\x1b", b"sort ")
            term.run_for(0.3)
        os.write(master, b"\x11")  # ctrl+q
        term.run_for(1.0)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)
        os.close(master)
    app_stats = json.loads(stats_path.read_text() or "{}")
    stats_path.unlink(missing_ok=True)
    print(f"irq TUI benchmark: {args.runs} runs, {args.rate} heartbeat events/s, "
          f"{cols}x{rows} pty, {args.seconds:g}s steady state")
    print(f"  events applied by the client   {app_stats['events'] / app_stats['seconds']:.0f}/s")
    batches = app_stats["batches_applied"] / app_stats["seconds"]
    print(f"  batches applied (redraws)      {batches:.1f}/s (designed cap: 10/s)")
    print(f"  terminal frames                {steady['frames_per_s']:.1f}/s")
    print(f"  bytes to the terminal          {steady['bytes_per_s'] / 1024:.1f} KiB/s")
    print(f"  CPU (child)                    {steady['cpu'] * 100:.0f}% of one core")
    print(f"  memory (child)                 {steady['rss_mb']:.0f} MiB RSS, "
          f"peak {steady['peak_rss_mb']:.0f} MiB")
    print(f"  key->screen, s (sort 10k rows) p50 {statistics.median(sort_lat) * 1000:.0f} ms, "
          f"p95 {percentile(sort_lat, 0.95) * 1000:.0f} ms (n={len(sort_lat)})")
    print(f"  key->screen, ? (open help)     p50 {statistics.median(help_lat) * 1000:.0f} ms, "
          f"p95 {percentile(help_lat, 0.95) * 1000:.0f} ms (n={len(help_lat)})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stats", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.runs, args.rate, args.stats)
        return 0
    return parent_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
