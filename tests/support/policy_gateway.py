"""A real ``irq serve --policy FILE`` process for the agent-side policy guard tests (Temporal,
Restate, LangGraph): one backend, an operator token and an agent token scoped to it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from console.gateway.auth import create_token
from console.model import Role
from console.processes import free_port, stop_process
from tests.cli.cli_harness import gateway_ready

ROOT = Path(__file__).resolve().parents[2]


def start_process(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A child process in the repository (importable ``tests``), output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        )


@dataclass
class PolicyGateway:
    url: str
    operator: str
    agent: str  # an agent token scoped to the backend (``agent_scope``)
    process: subprocess.Popen[bytes]
    log: Path
    argv: list[str]
    home: Path

    @property
    def agent_url(self) -> str:
        return f"{self.url}/agent"

    def stop(self) -> None:
        stop_process(self.process)

    def kill(self) -> None:
        """SIGKILL: no shutdown at all (a crashed gateway host)."""
        self.process.kill()
        self.process.wait(10)

    def restart(self, timeout_s: float = 30.0) -> None:
        """``irq serve`` again on the same port, home (journal, tokens) and policy file."""
        self.process = start_process(self.argv, self.log, {"IRQ_HOME": str(self.home)})
        _wait_ready(self, timeout_s)


def _wait_ready(gateway: PolicyGateway, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not gateway_ready(gateway.url, gateway.operator):
        if gateway.process.poll() is not None or time.monotonic() > deadline:
            stop_process(gateway.process)
            raise RuntimeError(
                "irq serve --policy did not start:\n" + gateway.log.read_text()[-3000:]
            )
        time.sleep(0.1)


def start_policy_gateway(
    tmp: Path, backend_url: str, policy_text: str, agent_scope: str, timeout_s: float = 30.0
) -> PolicyGateway:
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    policy = tmp / "policy.toml"
    policy.write_text(policy_text)
    operator = create_token(Role.OPERATOR, "ops", home)
    agent = create_token(Role.AGENT, "policy-agent", home, scopes=[agent_scope])
    port = free_port()
    log = tmp / "serve.log"
    argv = [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
            "--backend", backend_url, "--policy", str(policy)]
    process = start_process(argv, log, {"IRQ_HOME": str(home)})
    gateway = PolicyGateway(
        f"ws://127.0.0.1:{port}", operator, agent, process, log, argv, home
    )
    _wait_ready(gateway, timeout_s)
    return gateway
