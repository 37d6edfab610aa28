"""``irq drill`` on the demo's own DBOS fleet (``console.demo.dbos.fleet`` under a real
gateway): the context's preempt_command is the one ``irq demo`` writes, the fleet that
started the workers SIGKILLs the worker of the drilled run and restarts it after its downtime,
and the drill reports a clean recovery."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import irq

from console.demo.preemption import preempt_command, request_preempt
from devtools.live_fleet import LiveFleet

pytestmark = [pytest.mark.slow]


@pytest.fixture
def demo_fleet(irq_home: Path) -> Iterator[LiveFleet]:
    # the drilled worker stays down 5 s, not 15 s: long enough for its run to be seen late
    with LiveFleet(irq_home, agents=2, workers=2, downtime_s=5.0) as fleet:
        template = preempt_command(irq_home)  # the fleet's db is IRQ_HOME/fleet.db
        (irq_home / "config.toml").write_text(
            'current_context = "demo"\n[contexts.demo]\n'
            f'url = "{fleet.url}"\ntoken = "{fleet.tokens["operator"]}"\n'
            f"preempt_command = '{template}'\n"
        )
        yield fleet


def test_a_drill_on_the_demo_fleet_recovers_cleanly(demo_fleet: LiveFleet, irq_home: Path):
    # a backend no demo process answers for, and a run no worker runs: refused, not hung
    assert request_preempt(irq_home / "preempt", "temporal", "x", 1)[0] is False
    ok, detail = request_preempt(irq_home / "preempt", "dbos", "no-such-workflow", 5)
    assert not ok and "no worker of this fleet runs" in detail

    result = irq("drill", "--yes", "-o", "json", "--timeout", "50")
    print(result.stdout, result.stderr)
    assert result.code == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["results"]
    assert row["backend"] == "dbos" and row["clean"] and row["resources_ok"]
    assert row["late_after_s"] is not None and row["recovered_after_s"] is not None
    assert row["completed_steps_rerun"] == []
    fleet_log = (irq_home / "fleet.log").read_text()
    assert "preempted demo-worker-" in fleet_log
    # not irq's verdict alone: DBOS's own system tables say the workflow was recovered
    # (a second execution attempt, started by DBOS) and is running or done, not failed
    recovered = _dbos_workflow(irq_home / "fleet.db", row["run_id"].partition("/")[2])
    assert recovered["recovery_attempts"] >= 2, recovered
    assert recovered["status"] in ("PENDING", "SUCCESS"), recovered


def _dbos_workflow(db: Path, wid: str) -> dict[str, object]:
    """The workflow as DBOS records it: its status and how often DBOS started it."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        status, attempts = conn.execute(
            "SELECT status, recovery_attempts FROM workflow_status WHERE workflow_uuid = ?",
            (wid,)).fetchone()
    return {"status": status, "recovery_attempts": int(attempts)}
