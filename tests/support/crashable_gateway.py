"""A real gateway process for the exactly-once tests: ``irq serve``, or the test-only entry
point tests/support/faulty_gateway.py that SIGKILLs itself at a named point, on one port and
one IRQ_HOME so a restart finds the journal the crashed gateway wrote. With ``journal`` (a
``postgresql://`` URL) it runs on that shared journal, passed as ``IRQ_JOURNAL`` so a password
in it stays off the command line; with ``policy`` as ``irq serve --policy FILE``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from console.gateway.auth import create_token
from console.model import Role
from console.processes import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]


class CrashableGateway:
    def __init__(self, home: Path, backend: str | list[str], journal: str | None = None, *,
                 policy: Path | None = None, extra_args: list[str] | None = None) -> None:
        self.home, self.backend, self.journal, self.policy = home, backend, journal, policy
        self.extra_args = list(extra_args or [])  # more ``irq serve`` flags
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home / "gateway.log"
        self.owner = f"{socket.gethostname()}:{self.port}"  # its name in a shared journal
        self.tokens = {r: create_token(Role(r), f"{r}-1", home) for r in ("operator", "admin")}

    def start(self, crash_at: str | None = None) -> None:
        """``irq serve``, or with ``crash_at`` the test-only gateway that SIGKILLs itself there."""
        env = {**os.environ, "IRQ_HOME": str(self.home)}
        if self.journal:
            env["IRQ_JOURNAL"] = self.journal
        if crash_at:
            cmd = [sys.executable, str(ROOT / "tests" / "support" / "faulty_gateway.py"),
                   "--port", str(self.port), "--backend", str(self.backend), "--crash-at", crash_at]
        else:
            backends = [self.backend] if isinstance(self.backend, str) else self.backend
            cmd = [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
                   *(arg for b in backends for arg in ("--backend", b)),
                   *(["--policy", str(self.policy)] if self.policy else []), *self.extra_args]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("gateway did not start:\n" + self.log.read_text()[-3000:])

    def stop(self) -> None:
        if self.process:
            stop_process(self.process)


def gateway_pair(root: Path, backend: str | list[str], journal: str, *,
                 policy: Path | None = None,
                 extra_args: list[str] | None = None) -> list[CrashableGateway]:
    """Gateways ``gw-a`` and ``gw-b`` on one shared journal, each with its own IRQ_HOME under
    ``root`` (its tokens) and port; not started."""
    pair = []
    for name in ("gw-a", "gw-b"):
        home = root / name
        home.mkdir()
        pair.append(CrashableGateway(home, backend, journal, policy=policy,
                                     extra_args=extra_args))
    return pair


def stop_cleanly(gateways: list[CrashableGateway]) -> None:
    """Stop every gateway (each by its pid), then check none of them logged a traceback."""
    for gw in gateways:
        gw.stop()
    for gw in gateways:
        text = gw.log.read_text(errors="replace") if gw.log.exists() else ""
        assert "Traceback" not in text, text[-3000:]
