"""Helpers for the CLI tests: run ``irq`` in-process or as a subprocess, and start a real
gateway as ``irq serve`` in a subprocess on a free loopback port (stopped by its pid)."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from typer.testing import CliRunner

from console.processes import (
    free_port,
    start_on_fresh_ports,
    stop_process,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
ENV_VARS = ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT", "IRQ_DEBUG")


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


# the JSON that -o json prints is a contract (docs/json-contract.md): fields are added, never renamed
RUN_FIELDS = {
    "id",
    "backend",
    "context",
    "native_id",
    "name",
    "state",
    "native_state",
    "heartbeat_age_s",
    "heartbeat_timeout_s",
    "progress",
    "resources",
    "interrupts",
    "warnings",
    "updated_at",
}
RESOURCE_FIELDS = {"id", "kind", "on_pause", "on_cancel", "state"}
INTERRUPT_FIELDS = {
    "id",
    "run_id",
    "title",
    "description",
    "action",
    "args",
    "args_schema",
    "allowed_decisions",
    "created_at",
    "age_s",
    "status",
    "decision",
}
PLAN_FIELDS = {
    "action",
    "targets",
    "operations",
    "resources_kept",
    "resources_released",
    "warnings",
}
STEP_FIELDS = {"index", "name", "status", "started_at", "completed_at"}
RESULT_FIELDS = {"id", "action", "target", "outcome", "detail", "plan"}
AUDIT_FIELDS = {"at", "identity", "role", "action", "target", "reason", "outcome", "plan"}


def irq(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Outcome:
    """Run the CLI in-process (typer's CliRunner; stdin is not a terminal)."""
    from console.cli.app import app

    result = CliRunner().invoke(app, list(args), env=env, input=input, catch_exceptions=False)
    return Outcome(result.exit_code, result.stdout, result.stderr)


def irq_process(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m console.cli.app`` (the real entry point) in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "console.cli.app", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def gateway_ready(url: str, token: str) -> bool:
    from console.client import GatewayClient, GatewayError

    async def probe() -> None:
        async with GatewayClient(url, token, subscribe=False, open_timeout=1):
            pass

    try:
        asyncio.run(probe())
    except GatewayError:
        return False
    return True


@dataclass
class ServedGateway:
    url: str
    port: int
    home: Path
    operator: str
    viewer: str
    admin: str
    process: subprocess.Popen[bytes]
    log: Path

    def env(self, token: str | None = None) -> dict[str, str]:
        env = {"IRQ_URL": self.url}
        if token is not None:
            env["IRQ_TOKEN"] = token
        return env





#: a DBOS worker written the way DBOS's own examples write one (no irq code): three-step
#: pipelines whose last step fails while a flag file exists (the retry tests' workload)
RETRY_AGENT = ROOT / "tests" / "cli" / "dbos_retry_agent.py"


def start_retry_agent(db: Path, work: Path, pipelines: int | None = None
                      ) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """:data:`RETRY_AGENT` on the SQLite database ``db``, its files and its log
    (``agent.log``) in ``work``, with none of irq's environment (a user's worker knows
    nothing of irq): the process and the open log, for the caller to stop and close."""
    log = open(work / "agent.log", "ab")  # noqa: SIM115 - the caller closes it
    argv = [sys.executable, str(RETRY_AGENT), str(db), str(work)]
    if pipelines is not None:
        argv.append(str(pipelines))
    agent = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("IRQ_")})
    return agent, log

def start_gateway(
    home: Path, backends: list[str] | None = None, port: int | None = None,
    extra_args: list[str] | None = None,
) -> ServedGateway:
    from console.gateway.auth import create_token
    from console.model import Role

    operator = create_token(Role.OPERATOR, "ops-test", home)
    viewer = create_token(Role.VIEWER, "viewer-test", home)
    admin = create_token(Role.ADMIN, "admin-test", home)
    picked = [port or free_port()]

    def repick() -> None:
        picked[0] = free_port()

    return start_on_fresh_ports(
        lambda: _serve(home, backends, picked[0], extra_args, (operator, viewer, admin)),
        repick, fixed=port is not None,
    )


def _serve(
    home: Path, backends: list[str] | None, port: int, extra_args: list[str] | None,
    tokens: tuple[str, str, str],
) -> ServedGateway:
    """Start ``irq serve`` on ``port`` and wait until it answers; :class:`PortTaken` when
    another process bound the port between the pick and the gateway's bind."""
    operator, viewer, admin = tokens
    log = home / "serve.log"
    args = [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port)]
    for backend in backends or []:
        args += ["--backend", backend]
    args += extra_args or []
    with open(log, "ab") as out:
        start = out.tell()
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(home)},
            cwd=ROOT,
        )
    url = f"ws://127.0.0.1:{port}"

    def exited() -> str | None:
        if proc.poll() is None:
            return None
        said = log.read_bytes()[start:].decode(errors="replace")
        return f"irq serve exited {proc.returncode}:\n{said}"

    if wait_until(lambda: gateway_ready(url, operator), timeout_s=30, interval_s=0.1,
                  failed=exited):
        return ServedGateway(url, port, home, operator, viewer, admin, proc, log)
    stop_process(proc)
    raise RuntimeError(f"irq serve did not answer within 30s:\n{log.read_text()}")


def on_a_terminal(
    *args: str, env: dict[str, str], answer: str, timeout: float = 60
) -> tuple[int, str]:
    """Run ``irq ARGS`` with stdin/stdout/stderr on a pseudo-terminal; type ``answer`` once
    the question appears. Returns the exit code and everything written to the terminal."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli.app", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, **env, "COLUMNS": "120"},
        cwd=ROOT,
        close_fds=True,
    )
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"[y/N]" in seen:
                os.write(leader, answer.encode() + b"\r")
                answered = True
            if proc.poll() is not None and not ready:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    return code, seen.decode("utf-8", "replace").replace("\r\n", "\n")


class CountingForwarder:
    """A plain TCP forwarder in front of a real gateway that counts the connections made
    through it (how many times a command connected), bytes passed through untouched."""

    def __init__(self, target: str) -> None:
        host_port = target.split("://", 1)[1].split("/", 1)[0]
        host, _, port = host_port.rpartition(":")
        self.target = (host, int(port))
        self.connections = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"ws://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:  # closed
                return
            self.connections += 1
            upstream = socket.create_connection(self.target)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(src, dst), daemon=True).start()

    def close(self) -> None:
        self._server.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
