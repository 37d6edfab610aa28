"""``irq drill`` on the demo's Restate service: restate-server, the demo's handler service and
feeder under a real gateway; ``serve_launcher_requests`` (what ``irq demo``'s wait loop calls)
answers the demo context's preempt_command by SIGKILLing the handler process the test started
and starting it again; Restate retries the journaled invocation and the drill reports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_harness import ROOT, gateway_ready, irq
from test_demo_policy_restate import _wait_ready

from console.demo.launcher import DEMO_AGENT_CONTEXT, DemoEnvironment
from console.demo.preemption import control_dir, preempt_command, serve_launcher_requests
from console.processes import ChildProcess, free_port, stop_process

pytestmark = [pytest.mark.slow]


@pytest.fixture
def restate_demo(irq_home: Path) -> Iterator[tuple[list[ChildProcess], str]]:
    from console.demo.restate.fleet import demo_extension
    from console.gateway.auth import create_token
    from console.model import Role

    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    operator = create_token(Role.OPERATOR, "drill-operator", irq_home)
    agent = create_token(Role.AGENT, "drill-agent", irq_home, scopes=("restate:local",))
    env = DemoEnvironment(demo_dir=irq_home, gateway_url=url, agent_url=f"{url}/agent",
                          agent_token=agent)
    extension = demo_extension(env)
    if extension is None:  # fail as the adapter tests do, with the install hint, never skip
        import restate  # noqa: F401 - ModuleNotFoundError: the restate-sdk is missing

        from backend_adapters.restate.dev_server import restate_server_binary

        restate_server_binary()  # FileNotFoundError: "restate-server is missing: `make install`"
        pytest.fail("the demo's Restate extension did not start although restate-sdk and "
                    "restate-server are installed")
    started: list[ChildProcess] = []
    stop = threading.Event()
    server = threading.Thread(
        target=lambda: [serve_launcher_requests(control_dir(irq_home), started)
                        for _ in iter(lambda: stop.wait(0.3), True)],
        daemon=True,
    )
    log = open(irq_home / "serve.log", "ab")  # noqa: SIM115 - closed below
    gateway: subprocess.Popen[bytes] | None = None
    try:
        for child in extension.servers:
            child.start()
            started.append(child)
            _wait_ready(child)
        gateway = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
             "--backend", extension.backends[0]],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not gateway_ready(url, operator):
            assert gateway.poll() is None, (irq_home / "serve.log").read_text()
            assert time.monotonic() < deadline, "irq serve did not answer"
            time.sleep(0.2)
        for child in extension.agents:
            # the nightly report's steps take 3 s, not 15 s: the drill waits for the step in
            # flight to complete again after the handler's restart
            child.env = {"IRQ_AGENT_URL": env.agent_url, "IRQ_AGENT_TOKEN": agent,
                         "IRQ_AGENT_CONTEXT": DEMO_AGENT_CONTEXT, "IRQ_DEMO_STEP_SCALE": "0.2",
                         **child.env}  # fmt: skip
            child.start()
            started.append(child)
            _wait_ready(child)
        (irq_home / "config.toml").write_text(
            f'current_context = "demo"\n[contexts.demo]\nurl = "{url}"\n'
            f"token = \"{operator}\"\npreempt_command = '{preempt_command(irq_home)}'\n"
        )
        server.start()
        yield started, extension.backends[0]
    finally:
        stop.set()
        for child in reversed(started):
            child.stop()
        if gateway is not None:
            stop_process(gateway)
        log.close()


def test_a_drill_on_the_demo_restate_service_recovers_cleanly(
    restate_demo: tuple[list[ChildProcess], str],
) -> None:
    deadline = time.monotonic() + 60
    while True:  # a Restate run beating
        out = irq("runs", "-o", "json")
        runs = json.loads(out.stdout) if out.code == 0 else []
        if any(r["backend"] == "restate" and r["state"] == "running"
               and r["heartbeat_age_s"] is not None for r in runs):
            break
        assert time.monotonic() < deadline, out.stdout + out.stderr
        time.sleep(1)
    children, backend = restate_demo
    (service,) = [c for c in children if c.name == "rs-svc"]
    service_pid = service.pid
    result = irq("drill", "--filter", "backend:restate", "--yes", "-o", "json",
                 "--timeout", "60")
    print(result.stdout, result.stderr)
    assert service.pid != service_pid  # killed and started again
    assert result.code == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["results"]
    assert row["backend"] == "restate" and row["clean"] and row["completed_steps_rerun"] == []
    # not irq's verdict alone: Restate's own tables show the invocation retried after the
    # kill (an attempt past the first) and not failed
    admin = backend.removeprefix("restate+").split("?")[0]
    inv = row["run_id"].partition("/")[2]
    reply = httpx.post(f"{admin}/query", headers={"accept": "application/json"}, timeout=10,
                       json={"query": "SELECT status, retry_count, last_failure FROM "
                                      f"sys_invocation WHERE id = '{inv}'"})
    reply.raise_for_status()
    (seen,) = reply.json()["rows"]
    assert seen["retry_count"] >= 1 and seen["status"] != "failed", seen
