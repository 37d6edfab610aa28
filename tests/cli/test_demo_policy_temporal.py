"""The Temporal part of ``irq demo`` on the demo policy: the extension's dev server and guarded
worker against ``irq serve --policy console/demo/policy.toml``. The refund, the table drop and
the prod deploy the Temporal demo agents propose end in the inbox naming the rule that asked
for each (a refund over 100 EUR: an operator; a drop: an admin; a prod deploy: two approvers)."""

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


def _start_extension(
    home: Path, url: str, agent_token: str, step_scale: float = 1.0, *worker_args: str
) -> tuple[list[ChildProcess], str]:
    """The extension's dev server (ready) and its guarded worker (not started yet); the worker
    multiplies its agents' step durations and restart delays by ``step_scale`` and gets
    ``worker_args`` too."""
    from console.demo.temporal.fleet import demo_extension

    env = DemoEnvironment(
        demo_dir=home,
        gateway_url=url,
        agent_url=f"{url}/agent",
        agent_token=agent_token,
        policy=DEMO_POLICY,
    )
    ext = demo_extension(env)
    if ext is None:  # fail as the adapter tests do, with the install hint, never skip quietly
        import temporalio  # noqa: F401 - ModuleNotFoundError: pip install 'irq[temporal]'

        from backend_adapters.temporal.dev_server import temporal_cli

        temporal_cli()  # FileNotFoundError: "the temporal CLI is missing: pip install ..."
        pytest.fail("the demo's Temporal extension did not start although temporalio and "
                    "the temporal CLI are installed")
    started: list[ChildProcess] = []
    try:
        for server in ext.servers:
            server.start()
            started.append(server)
            deadline = time.monotonic() + 30
            while not (server.ready and server.ready()):
                assert server.exit_code() is None, server.log_tail()
                assert time.monotonic() < deadline, f"{server.name} not ready"
                time.sleep(0.2)
        (worker,) = ext.agents
        assert "--guarded" in worker.argv
        worker.argv = [*worker.argv, "--step-scale", str(step_scale), *worker_args]
        worker.env = {
            "IRQ_AGENT_URL": env.agent_url,
            "IRQ_AGENT_TOKEN": agent_token,
            "IRQ_AGENT_CONTEXT": DEMO_AGENT_CONTEXT,
            **worker.env,
        }
    except BaseException:
        for process in reversed(started):
            process.stop(grace_s=10)
        raise
    return [*started, worker], ext.backends[0]


@pytest.fixture
def temporal_policy_demo(irq_home: Path) -> Iterator[dict[str, str]]:
    from console.gateway.auth import create_token
    from console.model import Role

    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    operator = create_token(Role.OPERATOR, "demo-policy-operator", irq_home)
    agent = create_token(Role.AGENT, "demo-policy-agent", irq_home, scopes=("temporal:local",))
    # a tenth of the demo's pace: the release train's 30 build steps take 4.5 s, not 45 s,
    # before it asks for the prod deploy (the policy, not the pace, is under test)
    processes, backend = _start_extension(irq_home, url, agent, step_scale=0.1)
    log = open(irq_home / "serve.log", "ab")  # noqa: SIM115 - closed below
    gateway: subprocess.Popen[bytes] | None = None
    try:
        gateway = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
             "--policy", str(DEMO_POLICY), "--backend", backend],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not gateway_ready(url, operator):
            assert gateway.poll() is None, (irq_home / "serve.log").read_text()
            assert time.monotonic() < deadline, "irq serve --policy did not answer"
            time.sleep(0.2)
        processes[-1].start()  # the worker, once the gateway can hand it the policy
        yield {"IRQ_URL": url, "IRQ_TOKEN": operator}
    finally:
        for process in reversed(processes):
            process.stop(grace_s=10)
        if gateway is not None:
            stop_process(gateway)
        log.close()


def test_the_temporal_demo_agents_ask_by_the_demo_policy(
    temporal_policy_demo: dict[str, str],
) -> None:
    wanted = {"issue_refund", "drop_table", "deploy"}

    def inbox() -> dict[str, dict[str, Any]]:
        out = irq("inbox", "-o", "json", env=temporal_policy_demo)
        assert out.code == 0, out.stderr
        return {i["action"]: i for i in json.loads(out.stdout) if i["action"] in wanted}

    deadline = time.monotonic() + 150
    items = inbox()
    while items.keys() != wanted and time.monotonic() < deadline:
        time.sleep(1.0)
        items = inbox()
    assert items.keys() == wanted, sorted(items)

    refund = items["issue_refund"]
    assert refund["args"]["amount"] > 100
    assert refund["policy"]["rule"] == "refund-approval"
    assert refund["policy"]["decide_role"] == "operator"
    drop = items["drop_table"]
    assert drop["policy"]["rule"] == "drop-table-admin"
    assert drop["policy"]["decide_role"] == "admin"
    assert set(drop["allowed_decisions"]) == {"approve", "reject"}
    deploy = items["deploy"]
    assert deploy["args"]["environment"] == "prod"
    assert deploy["policy"]["rule"] == "prod-deploy-four-eyes"
    assert deploy["policy"]["approvers"] == 2
