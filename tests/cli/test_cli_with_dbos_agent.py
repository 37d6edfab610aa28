"""End to end with a real DBOS agent on SQLite (nothing mocked): the operator's path through
the CLI — list, inbox, approve exactly once, plan, pause (lock released, GPU kept), resume
without re-running completed steps, audit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_harness import (
    INTERRUPT_FIELDS,
    PLAN_FIELDS,
    RESOURCE_FIELDS,
    ROOT,
    RUN_FIELDS,
    STEP_FIELDS,
    ServedGateway,
    irq,
    start_gateway,
)

from console.processes import free_port, stop_process

pytestmark = [
    pytest.mark.slow,
]

RUN_ID = "dbos:local/wf-cli-1"
GPU_PRICE = 2.5  # per hour; the agent's gpu-0 declares count=2
INTERRUPT_ID = "dbos:local/wf-cli-1#wf-cli-1/1"


@dataclass
class Fleet:
    gateway: ServedGateway
    events: Path

    def env(self) -> dict[str, str]:
        return self.gateway.env(self.gateway.operator)

    def agent_events(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines() if line]

    def released(self) -> list[str]:
        return [e["id"] for e in self.agent_events() if e["event"] == "release"]


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture
def fleet(irq_home: Path) -> Iterator[Fleet]:
    from console.demo.launcher import dbos_backend_url
    from console.gateway.auth import create_token
    from console.model import Role

    db = irq_home / "agents.db"
    events = irq_home / "agent-events.jsonl"
    # the gateway prices GPUs from the config file: plans show the work at risk in money
    (irq_home / "config.toml").write_text(f'[prices]\ngpu = {GPU_PRICE}\ncurrency = "USD"\n')
    port = free_port()
    agent_token = create_token(Role.AGENT, "cli-test-agent", irq_home)
    agent_log = open(irq_home / "agent.log", "ab")  # noqa: SIM115 - closed below
    agent = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("dbos_cli_agent.py")),
            "--db",
            str(db),
            "--events",
            str(events),
        ],
        stdout=agent_log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={
            **os.environ,
            "IRQ_AGENT_URL": f"ws://127.0.0.1:{port}/agent",
            "IRQ_AGENT_TOKEN": agent_token,
            "PYTHONPATH": str(ROOT),
        },
        cwd=ROOT,
    )
    gateway: ServedGateway | None = None
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the agent's database", 60)
        assert agent.poll() is None, (irq_home / "agent.log").read_text()
        gateway = start_gateway(irq_home, [dbos_backend_url(db) + "?poll=0.3"], port=port)
        yield Fleet(gateway, events)
    finally:
        stop_process(agent)
        agent_log.close()
        if gateway is not None:
            stop_process(gateway.process)


def _runs(fleet: Fleet) -> dict[str, dict[str, Any]]:
    result = irq("runs", "-o", "json", env=fleet.env())
    assert result.code == 0, result.stderr
    return {r["id"]: r for r in json.loads(result.stdout)}


def _state(fleet: Fleet) -> str | None:
    run = _runs(fleet).get(RUN_ID)
    return run["state"] if run else None


def test_operator_path_through_the_cli_against_a_real_dbos_agent(fleet: Fleet):
    env = fleet.env()

    # the interrupt shows up in the inbox, with the contract's fields
    def pending() -> list[dict[str, Any]]:
        out = irq("inbox", "-o", "json", env=env)
        assert out.code == 0, out.stderr
        return json.loads(out.stdout)

    (interrupt,) = eventually(pending, "the interrupt in the inbox")
    assert INTERRUPT_FIELDS <= interrupt.keys()
    assert interrupt["id"] == INTERRUPT_ID
    assert interrupt["run_id"] == RUN_ID
    assert interrupt["action"] == "deploy" and interrupt["args"] == {"env": "prod"}
    assert set(interrupt["allowed_decisions"]) == {"approve", "edit", "reject"}
    assert interrupt["status"] == "pending"

    # an edit that breaks the argument schema is refused (exit 2) and nothing is delivered
    bad = irq("edit", "wf-cli-1/1", "--merge", "--args", '{"env": "moon"}', "--yes", env=env)
    assert bad.code == 2, bad.stdout + bad.stderr
    assert "invalid" in bad.stdout

    # runs: state, heartbeat age, resources (jsonl is one object per line)
    def beating_and_waiting() -> dict[str, Any] | None:
        run = _runs(fleet).get(RUN_ID, {})
        waiting = run.get("heartbeat_age_s") is not None and run.get("state") == "waiting"
        return run if waiting else None

    run = eventually(beating_and_waiting, "a heartbeat from the waiting run")
    assert RUN_FIELDS <= run.keys()
    assert isinstance(run["heartbeat_age_s"], float | int)
    assert {r["id"] for r in run["resources"]} == {"db-lock", "gpu-0"}
    assert all(RESOURCE_FIELDS <= r.keys() for r in run["resources"])
    assert run["interrupts"] == [INTERRUPT_ID]
    # (a beat that a loaded machine delays a second can show the run late for a moment)
    def table_waiting() -> str | None:
        table = irq("runs", env=env).stdout
        return table if "waiting" in table else None

    table = eventually(table_waiting, "the table to show the run waiting")
    assert RUN_ID in table and "lock, gpu" in table
    inbox_text = irq("inbox", env=env).stdout
    assert INTERRUPT_ID in inbox_text and "Deploy to prod?" in inbox_text
    lines = irq("runs", "-o", "jsonl", env=env).stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [RUN_ID]
    # listed and filtered on the gateway: --state, --backend and --filter each narrow it
    def listed(*args: str) -> list[str]:
        out = irq("runs", "-o", "json", *args, env=env)
        assert out.code == 0, out.stderr
        return [r["id"] for r in json.loads(out.stdout)]

    assert listed("--state", "waiting,late") == [RUN_ID]
    assert listed("--state", "completed") == []
    assert listed("--backend", "dbos") == [RUN_ID] == listed("--backend", "dbos:local")
    assert listed("--backend", "temporal") == []
    assert listed("--filter", "has:gpu has:interrupt") == [RUN_ID]
    assert listed("--filter", "-has:gpu") == []

    # approve by a short id; a second approval is a conflict (exit 4) and is not delivered
    approved = irq("approve", "wf-cli-1/1", "--reason", "ship it", "--yes", env=env)
    assert approved.code == 0, approved.stderr
    assert "applied" in approved.stdout
    again = irq("approve", INTERRUPT_ID, "--yes", "-o", "json", env=env)
    assert again.code == 4, again.stdout + again.stderr
    assert json.loads(again.stdout)[0]["outcome"] == "conflict"
    eventually(
        lambda: any(e["event"] == "step" for e in fleet.agent_events()),
        "the agent to continue after the approval",
    )
    decisions = [e for e in fleet.agent_events() if e["event"] == "decision"]
    assert len(decisions) == 1 and decisions[0]["approved"] is True

    # the plan: the lock is released on pause, the GPU slice is kept
    eventually(lambda: _state(fleet) == "running", "the run to be running again")
    dry = irq("pause", "wf-cli-1", "--dry-run", "-o", "json", env=env)
    assert dry.code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert PLAN_FIELDS <= plan.keys()
    assert plan["targets"] == [RUN_ID]
    assert [r["id"] for r in plan["resources_kept"]] == ["gpu-0"]
    assert [r["id"] for r in plan["resources_released"]] == ["db-lock"]
    text = irq("pause", "wf-cli-1", "--dry-run", env=env)
    assert "resources kept" in text.stdout and "gpu-0" in text.stdout

    # cancel's plan prices the work at risk: minutes since the last step x 2 GPUs held
    dry = irq("cancel", "wf-cli-1", "--dry-run", "-o", "json", env=env)
    assert dry.code == 0, dry.stderr
    (risk,) = json.loads(dry.stdout)["work_at_risk"]
    # counted from a known time (the last journaled step, else the run's start) a few seconds
    # ago at most in this test: the minutes (two decimals) can round to 0.0 (CI saw it)
    assert risk["run_id"] == RUN_ID and risk["counted_from"] in ("last_step", "start")
    assert risk["minutes"] >= 0 and risk["since"] is not None
    assert risk["gpus"] == 2 and risk["gpu_minutes"] == pytest.approx(risk["minutes"] * 2)
    assert risk["cost"] == pytest.approx(risk["minutes"] / 60 * GPU_PRICE * 2, abs=1e-4)
    assert risk["currency"] == "USD"
    text = irq("cancel", "wf-cli-1", "--dry-run", env=env)
    assert "work at risk:" in text.stdout and "× 2 gpu" in text.stdout and "$" in text.stdout

    # pause: applied; the agent releases the lock and keeps the GPU
    paused = irq("pause", "wf-cli-1", "--yes", "--reason", "GPU maintenance", "-o", "json", env=env)
    assert paused.code == 0, paused.stdout + paused.stderr
    (result,) = json.loads(paused.stdout)
    assert result["outcome"] == "applied" and result["target"] == RUN_ID
    eventually(lambda: _state(fleet) == "paused", "the run to be paused")
    eventually(lambda: "db-lock" in fleet.released(), "the lock to be released")
    assert "gpu-0" not in fleet.released()
    steps_at_pause = {e["index"] for e in fleet.agent_events() if e["event"] == "step"}

    # show: journal steps with the contract's fields
    shown = irq("show", "wf-cli-1", "-o", "json", env=env)
    assert shown.code == 0, shown.stderr
    detail = json.loads(shown.stdout)
    assert detail["id"] == RUN_ID
    assert detail["journal"] and all(STEP_FIELDS <= s.keys() for s in detail["journal"])
    completed = {s["name"] for s in detail["journal"] if s["status"] == "completed"}
    assert "plan" in completed

    # resume: continues; completed steps are not executed again
    resumed = irq("resume", "wf-cli-1", "--yes", env=env)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    eventually(lambda: _state(fleet) in ("running", "late"), "the run to resume")
    eventually(
        lambda: (
            len([e for e in fleet.agent_events() if e["event"] == "step"]) > len(steps_at_pause) + 2
        ),
        "new steps after resume",
    )
    indices = [e["index"] for e in fleet.agent_events() if e["event"] == "step"]
    reruns = [i for i in set(indices) if indices.count(i) > 1]
    assert len(reruns) <= 1, f"completed steps ran again: {reruns}"  # only the in-flight one

    # audit: who did what, with the reason
    audit = irq("audit", "--target", "wf-cli-1", "-o", "json", env=env)
    assert audit.code == 0
    entries = json.loads(audit.stdout)
    actions = {(e["action"], e["outcome"]) for e in entries}
    assert ("pause", "applied") in actions and ("resume", "applied") in actions
    assert any(e["reason"] == "GPU maintenance" and e["identity"] == "ops-test" for e in entries)
