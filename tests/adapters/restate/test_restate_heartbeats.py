"""An instrumented handler (backend_adapters.restate.agent.AgentRun) beats into a real
``irq serve``: a SIGSTOPped service is ``late`` in irq within a few heartbeat intervals while
Restate still says ``running`` (its own detection waits for the inactivity + abort timeouts,
11 min by default); a cancel makes the handler release its GPU, reported to irq."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from restate_scenarios import HERE, invocation, send

from backend_adapters.restate.dev_server import HypercornService, RestateServer
from console.processes import stop_process
from tests.cli.cli_harness import ServedGateway, irq, start_gateway

T = TypeVar("T")


def eventually(check: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.1)


@dataclass
class Fleet:
    server: RestateServer
    service: HypercornService
    gateway: ServedGateway
    steps_file: Path

    def run(self, inv: str) -> dict[str, Any] | None:
        out = irq("runs", "-o", "json", env=self.gateway.env(self.gateway.operator))
        assert out.code == 0, out.stderr
        return next((r for r in json.loads(out.stdout) if r["native_id"] == inv), None)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from console.gateway.auth import create_token
    from console.model import Role

    tmp = tmp_path_factory.mktemp("restate-beats")
    home = tmp / "home"
    home.mkdir()
    saved = {k: os.environ.get(k) for k in ("IRQ_HOME", "IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT")}
    os.environ["IRQ_HOME"] = str(home)
    for k in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
        os.environ.pop(k, None)
    server = RestateServer(base_dir=tmp / "server")
    server.start()
    gateway = start_gateway(home, [server.backend_url(poll=0.3)])
    token = create_token(Role.AGENT, "restate-agents", home, scopes=["restate:local"])
    service = HypercornService(
        app="services:app",
        cwd=HERE,
        log=tmp / "service.log",
        env={
            "IRQ_RESTATE_STEPS": str(tmp / "steps.log"),
            "IRQ_AGENT_URL": f"{gateway.url}/agent",
            "IRQ_AGENT_TOKEN": token,
        },
    )
    try:
        service.start()
        server.register(service.url)
        yield Fleet(server, service, gateway, tmp / "steps.log")
    finally:
        service.stop()
        stop_process(gateway.process)
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_sigstop_of_the_service_is_late_in_irq_while_restate_says_running(fleet: Fleet) -> None:
    inv = send(fleet.server.ingress_url, "IrqBeats/work", {"slow_s": 60})
    run = eventually(
        lambda: (r := fleet.run(inv)) and r["heartbeat_at"] and r["state"] == "running" and r,
        "the handler's heartbeats in irq runs",
    )
    assert run["resources"][0]["id"] == "gpu-0" and run["heartbeat_interval_s"] == 0.5
    pid = fleet.service.child.pid if fleet.service.child else None
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        late = eventually(
            lambda: (r := fleet.run(inv))
            and ("late" in (r["state"], r.get("suspected_state"))
                 or "lost" in (r["state"], r.get("suspected_state")))
            and r,
            "irq to say late",
            timeout_s=30,
        )
        seen_after = time.monotonic() - stopped
        restate_status = invocation(fleet.server.admin_url, inv).get("status")
    finally:
        os.kill(pid, signal.SIGCONT)
    print(f"irq: {late['state']}/{late.get('suspected_state')} {seen_after:.1f}s after SIGSTOP; "
          f"Restate then: {restate_status}")
    assert seen_after < 20  # interval 0.5 s, timeout 3 s; generous for a loaded machine
    assert restate_status == "running"  # Restate has not noticed (inactivity 1m + abort 10m)
    httpx_kill(fleet.server.admin_url, inv)


def httpx_kill(admin: str, inv: str) -> None:
    import httpx

    httpx.patch(f"{admin}/invocations/{inv}/kill", timeout=10)


def test_cancel_makes_the_handler_release_its_gpu_and_irq_sees_it(fleet: Fleet) -> None:
    inv = send(fleet.server.ingress_url, "IrqBeats/work", {"sleep_s": 600})
    eventually(lambda: (r := fleet.run(inv)) and r["resources"], "resources reported")
    env = fleet.gateway.env(fleet.gateway.operator)
    out = irq("cancel", f"restate:local/{inv}", "--yes", "--reason", "done", env=env)
    assert out.code == 0, out.stdout + out.stderr
    eventually(
        lambda: f"{inv} released gpu-0" in fleet.steps_file.read_text(), "the handler's release"
    )
    run = eventually(
        lambda: (r := fleet.run(inv)) and r["state"] == "cancelled" and r, "cancelled in irq"
    )
    assert fleet.steps_file.read_text().count(f"{inv} released gpu-0") == 1
    gpu = eventually(
        lambda: next(
            (x for x in ((fleet.run(inv) or {}).get("resources") or [])
             if x["id"] == "gpu-0" and x["state"] == "released"),
            None,
        ),
        "gpu-0 released in irq",
    )
    assert gpu["on_cancel"] == "release" and run["state"] == "cancelled"


def test_hang_detection_irq_versus_restate_with_short_service_timeouts(fleet: Fleet) -> None:
    """With the service's inactivity and abort timeouts cut to 3 s + 3 s, Restate itself notices
    the frozen service (backing-off, RT0001 'abort timeout'); irq's heartbeat view says late
    first. Both times are printed for the README."""
    import httpx

    admin = fleet.server.admin_url
    reply = httpx.patch(
        f"{admin}/services/IrqBeats",
        json={"inactivity_timeout": "3s", "abort_timeout": "3s"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    inv = send(fleet.server.ingress_url, "IrqBeats/work", {"slow_s": 60})
    eventually(
        lambda: (r := fleet.run(inv)) and r["heartbeat_at"] and r["state"] == "running" and r,
        "the handler's heartbeats in irq runs",
    )
    assert (fleet.run(inv) or {})["abort_timeout_s"] == 6.0
    pid = fleet.service.child.pid if fleet.service.child else None
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        eventually(
            lambda: (r := fleet.run(inv))
            and ({"late", "lost"} & {r["state"], r.get("suspected_state")}),
            "irq to say late",
            timeout_s=30,
        )
        irq_s = time.monotonic() - stopped
        row = eventually(
            lambda: (x := invocation(admin, inv)).get("status") == "backing-off" and x,
            "Restate to notice the hang",
            timeout_s=60,
        )
        restate_s = time.monotonic() - stopped
    finally:
        os.kill(pid, signal.SIGCONT)
    print(f"SIGSTOP: irq late after {irq_s:.1f}s; Restate backing-off after {restate_s:.1f}s "
          f"({row.get('last_failure_error_code')}: {row.get('last_failure')})")
    assert irq_s < restate_s
    assert row.get("last_failure_error_code") == "RT0001"
    httpx_kill(admin, inv)
