"""``/metrics``, ``/healthz`` and ``/readyz`` of a real ``irq serve`` over a real DBOS agent
that beats and asks a question (alerting_dbos_agent.py, instrumented as a user would):

- the scrape parses with prometheus_client's own parser and holds the families an operator's
  dashboard reads (connections, frames, beats, backend polls, alerts open, jobs, ...);
- an alert ack and an approval move the command counters and the latency histogram of
  their action (``decide``: the decision latency);
- ``/healthz`` and ``/readyz`` answer JSON naming the backend; a websocket client still
  connects on the same port;
- ``--metrics-token`` guards ``/metrics`` (not the health checks); ``--no-metrics``: 404;
- docs/grafana-irq.json references only names the gateway exports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.processes import free_port, stop_process
from tests.cli.cli_harness import ROOT, ServedGateway, irq, start_gateway

AGENT = Path(__file__).with_name("alerting_dbos_agent.py")
DASHBOARD = ROOT / "docs" / "grafana-irq.json"
METRICS_TOKEN = "scrape-secret-1"
#: what an operator's dashboard reads: each must be in every scrape, samples or not
FAMILIES = {
    "irq_connections", "irq_subscribers", "irq_client_lag_events_max",
    "irq_client_lag_events_sum", "irq_frames_received", "irq_frames_sent",
    "irq_client_resyncs", "irq_updates_shed", "irq_clients_shedding", "irq_rate_limited", "irq_refusals", "irq_command_latency_seconds",
    "irq_commands", "irq_backend_poll_seconds", "irq_backend_poll_errors",
    "irq_backend_reachable", "irq_alerts_open", "irq_jobs_running",
    "irq_job_targets_remaining", "irq_heartbeats_accepted", "irq_heartbeats_by_hand", "irq_runs", "irq_journal_up",
    "process_resident_memory_bytes",
}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Fleet:
    home: Path
    gateway: ServedGateway

    @property
    def http(self) -> str:
        return self.gateway.url.replace("ws://", "http://")

    def irq(self, *args: str) -> Any:
        out = irq(*args, "--url", self.gateway.url, "--token", self.gateway.operator,
                  env={"IRQ_HOME": str(self.home)})
        assert out.code == 0, (args, out.stdout, out.stderr)
        return json.loads(out.stdout) if "-o" in args else out.stdout

    def scrape(self) -> tuple[dict[str, str], Samples]:
        """Family name -> type, and every sample by (name, labels)."""
        resp = httpx.get(self.http + "/metrics", timeout=10,
                         headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"].startswith("text/plain")
        families: dict[str, str] = {}
        samples: Samples = {}
        for family in text_string_to_metric_families(resp.text):
            families[family.name] = family.type
            for s in family.samples:
                samples[(s.name, frozenset(s.labels.items()))] = s.value
        return families, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when it is absent (a labelled series before its first event)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from console.gateway.auth import create_token
    from console.model import Role

    home = tmp_path_factory.mktemp("metrics")
    db = home / "agents.db"
    port = free_port()
    agent_token = create_token(Role.AGENT, "metrics-test-agent", home)
    log = open(home / "agent.log", "ab")  # noqa: SIM115 - closed below
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), "--db", str(db)], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "IRQ_AGENT_URL": f"ws://127.0.0.1:{port}/agent",
             "IRQ_AGENT_TOKEN": agent_token, "PYTHONPATH": str(ROOT)})
    gateway = None
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the agent's database")
        assert agent.poll() is None, (home / "agent.log").read_text()
        gateway = start_gateway(
            home, [f"dbos+sqlite:///{db.resolve()}?poll=0.3"], port=port,
            extra_args=["--interrupt-deadline", "1s", "--alert-grace", "0.5s",
                        "--metrics-token", METRICS_TOKEN])
        yield Fleet(home, gateway)
    finally:
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


def test_the_scrape_parses_and_holds_what_a_dashboard_reads(fleet: Fleet) -> None:
    def beating() -> Samples | None:
        _families, samples = fleet.scrape()
        return samples if value(samples, "irq_heartbeats_accepted_total") > 0 and value(
            samples, "irq_connections", role="agent") >= 1 else None

    samples = eventually(beating, "the agent's beats counted")
    families, samples = fleet.scrape()
    assert FAMILIES <= set(families), FAMILIES - set(families)
    assert families["irq_command_latency_seconds"] == "histogram"
    assert families["irq_commands"] == "counter"
    assert value(samples, "irq_backend_reachable", backend="dbos", context="dbos:local") == 1
    assert value(samples, "irq_backend_poll_seconds_count", context="dbos:local") >= 1
    assert value(samples, "irq_frames_received_total", channel="agent", type="hello") >= 1
    assert value(samples, "irq_frames_received_total", channel="client", type="hello") >= 1
    assert value(samples, "irq_journal_up") == 1
    assert value(samples, "irq_runs", state="running") >= 2  # wf-stuck, wf-slow
    # no label names a run: a series per run would be 100,000 series
    assert not any("run" in dict(labels) or "run_id" in dict(labels)
                   for _name, labels in samples)


def test_an_ack_and_a_decision_move_the_command_counters_and_latency(fleet: Fleet) -> None:
    overdue = eventually(lambda: next((a for a in fleet.irq("alerts", "-o", "json")
                                       if a["kind"] == "interrupt_overdue"), None),
                         "the interrupt_overdue alert")
    _families, before = fleet.scrape()
    assert value(before, "irq_alerts_open", kind="interrupt_overdue", state="open") == 1
    fleet.irq("alerts", "ack", overdue["id"], "--reason", "on it", "--yes")
    fleet.irq("approve", overdue["subject"], "--reason", "ok", "--yes")
    _families, after = fleet.scrape()
    for action in ("alert_ack", "decide"):
        assert value(after, "irq_command_latency_seconds_count", action=action) == value(
            before, "irq_command_latency_seconds_count", action=action) + 1, action
        assert value(after, "irq_commands_total", action=action, outcome="applied") == value(
            before, "irq_commands_total", action=action, outcome="applied") + 1, action
        assert value(after, "irq_command_latency_seconds_sum", action=action) > 0
    assert value(after, "irq_frames_sent_total", type="result") >= 2
    assert value(after, "irq_frames_received_total", channel="client", type="command") >= 2


def test_health_and_readiness_answer_json_beside_the_websocket(fleet: Fleet) -> None:
    import asyncio

    from console.client import GatewayClient

    health = httpx.get(fleet.http + "/healthz", timeout=10)
    assert health.status_code == 200 and health.headers["content-type"] == "application/json"
    assert health.json() == {"status": "ok", "journal": "ok",
                             "backends": {"reachable": ["dbos:local"], "unreachable": []}}
    ready = httpx.get(fleet.http + "/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json()["ready"] is True and ready.json()["untried"] == []

    async def connect() -> str:
        async with GatewayClient(fleet.gateway.url, fleet.gateway.viewer,
                                 subscribe=False) as client:
            return client.role

    assert asyncio.run(connect()) == "viewer"


def test_the_metrics_token_guards_metrics_and_not_health(fleet: Fleet) -> None:
    assert httpx.get(fleet.http + "/metrics", timeout=10).status_code == 401
    wrong = httpx.get(fleet.http + "/metrics", headers={"Authorization": "Bearer nope"},
                      timeout=10)
    assert wrong.status_code == 401
    assert httpx.get(fleet.http + "/healthz", timeout=10).status_code == 200


def test_the_dashboard_references_only_exported_names(fleet: Fleet) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    families, samples = fleet.scrape()
    exported = set(families) | {name for name, _labels in samples}
    referenced: set[str] = set()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and all(p["targets"] and p["gridPos"] for p in panels)
    for panel in panels:
        for target in panel["targets"]:
            referenced |= set(re.findall(r"\b((?:irq|process)_[a-z0-9_]+)\b", target["expr"]))
    assert referenced, "the dashboard queries nothing"
    missing = {name for name in referenced
               if name not in exported
               and re.sub(r"_(bucket|count|sum|total)$", "", name) not in families}
    assert not missing, missing
    for family in ("irq_command_latency_seconds", "irq_backend_poll_seconds",
                   "irq_alerts_open", "irq_connections", "irq_frames_sent"):
        assert any(name.startswith(family) for name in referenced), family


async def test_no_metrics_turns_the_endpoint_off(tmp_path: Path) -> None:
    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings

    gateway = Gateway(GatewaySettings(port=0, home=tmp_path, metrics=False))
    await gateway.start()
    try:
        async with httpx.AsyncClient() as http:
            base = f"http://127.0.0.1:{gateway.port}"
            assert (await http.get(base + "/metrics")).status_code == 404
            assert (await http.get(base + "/healthz")).status_code == 200
    finally:
        await gateway.stop()
