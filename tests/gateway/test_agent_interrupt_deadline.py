"""An agent's own interrupt deadline end to end: a real ``irq serve`` with no configured
default (``--interrupt-deadline`` absent, a fresh IRQ_HOME) over a real DBOS agent whose
helper call passes ``deadline=``. The interrupt shows its ``deadline_at`` (creation +
deadline) in ``irq inbox -o json``, and past it an ``interrupt_overdue`` alert is raised;
the one whose deadline is an hour away raises nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from console.processes import free_port, stop_process
from tests.cli.cli_harness import ROOT, ServedGateway, irq, start_gateway
from tests.gateway.test_alerts_end_to_end import eventually

AGENT = Path(__file__).with_name("deadline_dbos_agent.py")


@dataclass
class Served:
    home: Path
    gateway: ServedGateway

    def irq_json(self, *args: str) -> Any:
        out = irq(*args, "-o", "json", "--url", self.gateway.url, "--token",
                  self.gateway.operator, env={"IRQ_HOME": str(self.home)})
        assert out.code == 0, (args, out.stdout, out.stderr)
        return json.loads(out.stdout)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from console.gateway.auth import create_token
    from console.model import Role

    home = tmp_path_factory.mktemp("deadlines")
    db = home / "agents.db"
    port = free_port()
    agent_token = create_token(Role.AGENT, "deadline-test-agent", home)
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
        gateway = start_gateway(home, [f"dbos+sqlite:///{db.resolve()}?poll=0.3"], port=port,
                                extra_args=["--alert-grace", "0.5s"])
        yield Served(home, gateway)
    finally:
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


def _interrupt(served: Served, wid: str) -> dict[str, Any] | None:
    return next((i for i in served.irq_json("inbox") if i["run_id"].endswith(f"/{wid}")), None)


def _overdue(served: Served) -> list[dict[str, Any]]:
    return [a for a in served.irq_json("alerts") if a["kind"] == "interrupt_overdue"]


def test_the_agents_deadline_shows_in_the_inbox_and_past_it_the_interrupt_is_overdue(
        served: Served) -> None:
    soon = eventually(lambda: _interrupt(served, "wf-soon"), "wf-soon's interrupt")
    later = eventually(lambda: _interrupt(served, "wf-later"), "wf-later's interrupt")
    for intr, seconds in ((soon, 1), (later, 3600)):
        created = datetime.fromisoformat(intr["created_at"])
        assert datetime.fromisoformat(intr["deadline_at"]) == created + timedelta(seconds=seconds)
        assert intr["policy"] is None  # the agent's own deadline, not a rule's
    [alert] = eventually(lambda: _overdue(served), "the interrupt_overdue alert")
    assert alert["subject"] == soon["id"] and alert["state"] == "open"
    assert "overdue" in alert["detail"]
    # the same evaluator pass saw wf-later: an hour away, nothing raised for it
    assert all(a["subject"] != later["id"] for a in _overdue(served))
