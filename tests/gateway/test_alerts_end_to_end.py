"""Alerts end to end: a real ``irq serve`` over a real DBOS agent that beats (helpers, as a
user instruments an agent), a local HTTP receiver for the webhook, and ``irq alerts``.

- an interrupt with no deadline of its own gets ``--interrupt-deadline 1s``; past it an
  ``interrupt_overdue`` alert is raised and escalated: the POST names the interrupt and says
  overdue, exactly once (the stalled alert, raised later, is POSTed after it on the same queue:
  that later POST is the event proving no second one came);
- a run whose progress stops while its beats go on is ``stalled``; one that creeps forward
  slowly is not;
- ack and silence (``--yes``, audited); the alerts survive a gateway restart, same ids and
  states; deciding the interrupt clears its alert.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from console.processes import free_port, stop_process
from tests.cli.cli_harness import ROOT, ServedGateway, irq, start_gateway

AGENT = Path(__file__).with_name("alerting_dbos_agent.py")


@dataclass
class Receiver:
    posts: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [p for p in list(self.posts) if p.get("kind") == kind]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.posts.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield got
    server.shutdown()


@dataclass
class Fleet:
    home: Path
    port: int
    args: list[str]
    backend: str
    gateway: ServedGateway

    def restart(self) -> None:
        stop_process(self.gateway.process)
        self.gateway = start_gateway(self.home, [self.backend], port=self.port,
                                     extra_args=self.args)

    def irq(self, *args: str) -> Any:
        out = irq(*args, "--url", self.gateway.url, "--token", self.gateway.operator,
                  env={"IRQ_HOME": str(self.home)})
        assert out.code == 0, (args, out.stdout, out.stderr)
        return json.loads(out.stdout) if "-o" in args else out.stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[Fleet]:
    from console.gateway.auth import create_token
    from console.model import Role

    home = tmp_path_factory.mktemp("alerts")
    db = home / "agents.db"
    port = free_port()
    notify = home / "notify.toml"
    notify.write_text(f'[notify]\nper_kind = 100\n[[notify.webhooks]]\nurl = "{receiver.url}"\n'
                      'events = ["interrupt_overdue", "stalled"]\n')
    agent_token = create_token(Role.AGENT, "alert-test-agent", home)
    log = open(home / "agent.log", "ab")  # noqa: SIM115 - closed below
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), "--db", str(db)], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "IRQ_AGENT_URL": f"ws://127.0.0.1:{port}/agent",
             "IRQ_AGENT_TOKEN": agent_token, "PYTHONPATH": str(ROOT)})
    args = ["--interrupt-deadline", "1s", "--alert-grace", "0.5s", "--stalled-after", "3s",
            "--notify-config", str(notify)]
    backend = f"dbos+sqlite:///{db.resolve()}?poll=0.3"
    fleet = None
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the agent's database")
        assert agent.poll() is None, (home / "agent.log").read_text()
        fleet = Fleet(home, port, args, backend,
                      start_gateway(home, [backend], port=port, extra_args=args))
        yield fleet
    finally:
        stop_process(agent)
        log.close()
        if fleet is not None:  # the gateway running now (a test restarts it)
            stop_process(fleet.gateway.process)


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def _alerts(fleet: Fleet, *extra: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = fleet.irq("alerts", "-o", "json", *extra)
    return listed


def _one(fleet: Fleet, kind: str, about: str) -> dict[str, Any] | None:
    return next((a for a in _alerts(fleet) if a["kind"] == kind
                 and (a["run"] or a["subject"]).endswith(about)), None)


def test_an_overdue_interrupt_is_escalated_once_and_a_stuck_run_is_stalled(
        fleet: Fleet, receiver: Receiver) -> None:
    overdue = eventually(lambda: _one(fleet, "interrupt_overdue", "/wf-ask"),
                         "the interrupt_overdue alert")
    for key in ("id", "kind", "run", "since", "detail", "action", "state", "acked_by"):
        assert key in overdue
    assert overdue["state"] == "open" and overdue["subject"].startswith("dbos:")
    assert "#" in overdue["subject"] and "irq approve" in overdue["action"]
    stalled = eventually(lambda: _one(fleet, "stalled", "/wf-stuck"), "the stalled alert")
    assert "0.4" in stalled["detail"]
    # the stalled POST comes after the overdue one on the same queue: both delivered now
    eventually(lambda: receiver.of_kind("stalled"), "the stalled POST")
    [post] = receiver.of_kind("interrupt_overdue")
    assert post["interrupt_id"] == overdue["subject"] and "overdue" in post["title"].lower()
    assert post["alert"]["id"] == overdue["id"]
    assert _one(fleet, "stalled", "/wf-slow") is None  # slow but moving: not stalled
    assert [p["alert"]["run"] for p in receiver.of_kind("stalled")] == [stalled["run"]]


def test_ack_and_silence_are_recorded_and_survive_a_restart(fleet: Fleet,
                                                            receiver: Receiver) -> None:
    overdue = eventually(lambda: _one(fleet, "interrupt_overdue", "/wf-ask"), "the alert")
    stalled = eventually(lambda: _one(fleet, "stalled", "/wf-stuck"), "the stalled alert")
    fleet.irq("alerts", "ack", overdue["id"], "--reason", "calling the approver", "--yes")
    fleet.irq("alerts", "silence", stalled["id"][:8], "--for", "2h", "--reason",
              "known hang, vendor ticket 12", "--yes")
    acked = _one(fleet, "interrupt_overdue", "/wf-ask")
    assert acked is not None and acked["state"] == "acknowledged"
    assert acked["acked_by"] == "ops-test"
    silenced = _one(fleet, "stalled", "/wf-stuck")
    assert silenced is not None and silenced["silenced_until"]
    audit = fleet.irq("audit", "-o", "json", "--target", overdue["id"])
    assert [(e["action"], e["reason"]) for e in audit] == [("alert_ack", "calling the approver")]
    fleet.restart()
    after = {a["id"]: a for a in _alerts(fleet)}
    assert after[overdue["id"]]["state"] == "acknowledged"
    assert after[stalled["id"]]["silenced_until"] == silenced["silenced_until"]
    assert len([a for a in after.values() if a["kind"] == "interrupt_overdue"]) == 1


def test_deciding_the_interrupt_clears_its_alert(fleet: Fleet, receiver: Receiver) -> None:
    overdue = eventually(lambda: _one(fleet, "interrupt_overdue", "/wf-ask"), "the alert")
    fleet.irq("approve", overdue["subject"], "--reason", "ok", "--yes")

    def cleared() -> dict[str, Any] | None:
        listed = {a["id"]: a for a in _alerts(fleet, "--all")}
        found = listed.get(overdue["id"])
        return found if found and found["state"] == "cleared" else None

    eventually(cleared, "the interrupt_overdue alert cleared")
    assert _one(fleet, "interrupt_overdue", "/wf-ask") is None
    assert len(receiver.of_kind("interrupt_overdue")) == 1
