"""The Restate part of ``irq demo`` on the demo policy: with the demo's policy the refund
handler is a guarded tool call of the billing agent; against ``irq serve --policy`` its 120 EUR
refund waits in the inbox naming ``refund-approval``, and an approval lets it run (the
invocation completes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import ROOT, gateway_ready, irq

from console.demo.launcher import DEMO_AGENT_CONTEXT, DEMO_POLICY, DemoEnvironment
from console.processes import ChildProcess, free_port, stop_process

pytestmark = pytest.mark.slow


def _wait_ready(child: ChildProcess, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while child.ready is not None and not child.ready():
        assert child.alive(), child.log_tail()
        assert time.monotonic() < deadline, f"{child.name} not ready"
        time.sleep(0.1)


@pytest.fixture
def restate_policy_demo(irq_home: Path) -> Iterator[dict[str, str]]:
    from console.demo.restate.fleet import demo_extension
    from console.gateway.auth import create_token
    from console.model import Role

    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    operator = create_token(Role.OPERATOR, "demo-policy-operator", irq_home)
    agent = create_token(Role.AGENT, "demo-policy-agent", irq_home, scopes=("restate:local",))
    env = DemoEnvironment(
        demo_dir=irq_home, gateway_url=url, agent_url=f"{url}/agent", agent_token=agent,
        policy=DEMO_POLICY,
    )  # fmt: skip
    extension = demo_extension(env)
    if extension is None:  # fail as the adapter tests do, with the install hint, never skip
        import restate  # noqa: F401 - ModuleNotFoundError: the restate-sdk is missing

        from backend_adapters.restate.dev_server import restate_server_binary

        restate_server_binary()  # FileNotFoundError: "restate-server is missing: `make install`"
        pytest.fail("the demo's Restate extension did not start although restate-sdk and "
                    "restate-server are installed")
    started: list[ChildProcess] = []
    log = open(irq_home / "serve.log", "ab")  # noqa: SIM115 - closed below
    gateway: subprocess.Popen[bytes] | None = None
    try:
        for server in extension.servers:
            server.start()
            started.append(server)
            _wait_ready(server)
        gateway = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
             "--policy", str(DEMO_POLICY), "--backend", extension.backends[0]],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not gateway_ready(url, operator):
            assert gateway.poll() is None, (irq_home / "serve.log").read_text()
            assert time.monotonic() < deadline, "irq serve --policy did not answer"
            time.sleep(0.2)
        for child in extension.agents:
            child.env = {"IRQ_AGENT_URL": env.agent_url, "IRQ_AGENT_TOKEN": agent,
                         "IRQ_AGENT_CONTEXT": DEMO_AGENT_CONTEXT, **child.env}  # fmt: skip
            child.start()
            started.append(child)
            _wait_ready(child)
        yield {"IRQ_URL": url, "IRQ_TOKEN": operator}
    finally:
        for child in reversed(started):
            child.stop()
        if gateway is not None:
            stop_process(gateway)
        log.close()


def test_the_restate_refund_asks_by_the_demo_policy(restate_policy_demo: dict[str, str]) -> None:
    env = restate_policy_demo

    def refund() -> dict[str, Any] | None:
        out = irq("inbox", "-o", "json", env=env)
        assert out.code == 0, out.stderr
        found = [i for i in json.loads(out.stdout) if i["action"] == "issue_refund"]
        return found[0] if found else None

    deadline = time.monotonic() + 90
    item = refund()
    while item is None and time.monotonic() < deadline:
        time.sleep(0.5)
        item = refund()
    assert item is not None, "no guarded refund in the inbox"
    assert item["run_id"].startswith("restate:local/")
    assert item["args"] == {"order": "A-1001", "amount": 120, "currency": "EUR"}
    assert item["policy"]["rule"] == "refund-approval"

    approved = irq("approve", item["id"], "--reason", "damaged", "--yes", env=env)
    assert approved.code == 0, approved.stdout + approved.stderr

    def state() -> str:
        out = irq("runs", "-o", "json", env=env)
        runs = {r["id"]: r for r in json.loads(out.stdout)}
        return str(runs.get(item["run_id"], {}).get("state"))

    deadline = time.monotonic() + 30
    while state() != "completed" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert state() == "completed"
