"""Keep one child process running: restart it (after a delay) whenever it dies.

    python restart_supervisor.py run --pidfile PATH [--delay S] -- CMD ARGS...
    python restart_supervisor.py kill PATH

``run`` starts ``CMD ARGS...``, writes the pid of the child it started to ``PATH`` (rewritten
on every restart) and restarts it ``--delay`` seconds after it dies; SIGTERM stops the child
(by that pid) and the supervisor. ``kill`` is a preempt command: it SIGKILLs the pid in
``PATH`` -- the worker the supervisor itself started -- and returns once it is gone.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def run(pidfile: Path, delay: float, argv: list[str]) -> None:
    stop = threading.Event()
    child: subprocess.Popen[bytes] | None = None

    def terminate(*_: object) -> None:
        stop.set()
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, terminate)
    starts = 0
    while not stop.is_set():
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        starts += 1
        tmp = pidfile.with_suffix(".tmp")
        tmp.write_text(f"{child.pid}\n")
        tmp.replace(pidfile)
        print(f"supervisor: start {starts} pid {child.pid}", flush=True)
        child.wait()
        print(f"supervisor: pid {child.pid} exited {child.returncode}", flush=True)
        stop.wait(delay)
    if child is not None and child.poll() is None:
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()


def kill(pidfile: Path) -> int:
    pid = int(pidfile.read_text().strip())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # gone once its parent (the supervisor) reaped it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return 0
        time.sleep(0.05)
    print(f"pid {pid} still there after SIGKILL", file=sys.stderr)
    return 1


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run")
    run_p.add_argument("--pidfile", type=Path, required=True)
    run_p.add_argument("--delay", type=float, default=0.0)
    run_p.add_argument("argv", nargs=argparse.REMAINDER)
    kill_p = sub.add_parser("kill")
    kill_p.add_argument("pidfile", type=Path)
    args = parser.parse_args()
    if args.command == "kill":
        sys.exit(kill(args.pidfile))
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    run(args.pidfile, args.delay, argv)


if __name__ == "__main__":
    main()
