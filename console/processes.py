"""Local child processes: a free loopback port to start one on, stopping one by its pid, and
whether a pid is still alive.

Used by the demo launcher, the live fleet behind the TUI's screenshots, the Temporal dev
server wrapper and the test fixtures. A child is always stopped by its own pid, never by name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM ``proc`` by its pid, and SIGKILL it if it is still there after ``grace_s``.

    A SIGCONT goes first, in case a test froze it with SIGSTOP: a stopped process would
    never act on the SIGTERM.
    """
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(grace_s)
    except ProcessLookupError:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(grace_s)


def pid_alive(pid: int) -> bool:
    """Is ``pid`` a live process? A zombie (dead, not yet reaped) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone meanwhile, or no /proc: kill(0) answered
        return not Path("/proc").is_dir()
