"""``irq retry`` end to end on a real DBOS worker (SQLite; nothing mocked): a three-step
pipeline fails in its third step; the dry run names the kept and re-run steps; a running run
is refused (exit 4) and nothing changes; the retry forks a new run that reuses the first two
steps' results (they ran once, the third twice, counted outside the engine); the same key
again does nothing; the audit says ``retry``.

One gateway and one worker for the module (the tests run in order on one fleet).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_harness import ServedGateway, irq, start_gateway, start_retry_agent

from console.processes import stop_process

pytestmark = [pytest.mark.slow]

FAILED = "dbos:local/pipeline-1"
BUSY = "dbos:local/busy-1"


@dataclass
class Fleet:
    gateway: ServedGateway
    work: Path
    env: dict[str, str]

    def counts(self, pipeline: str = "pipeline-1") -> dict[str, int]:
        """How many times each step of ``pipeline`` (and its forks) ran."""
        return step_counts(self.work / "counts", pipeline)

    def runs(self) -> dict[str, dict[str, Any]]:
        out = irq("runs", "-o", "json", env=self.env)
        assert out.code == 0, out.stderr
        return {r["id"]: r for r in json.loads(out.stdout)}


def step_counts(path: Path, pipeline: str) -> dict[str, int]:
    """The agent's ``PIPELINE STEP`` lines for one pipeline, counted by step."""
    steps = [line.split()[1] for line in path.read_text().splitlines()
             if line.split()[0] == pipeline]
    return {step: steps.count(step) for step in set(steps)}


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from console.demo.launcher import dbos_backend_url

    home = tmp_path_factory.mktemp("retry-home")
    work = tmp_path_factory.mktemp("retry-work")
    (work / "fail").touch()
    (work / "hold").touch()
    db = work / "agent.db"
    agent, log = start_retry_agent(db, work)
    gateway: ServedGateway | None = None
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the worker's database")
        assert agent.poll() is None, (work / "agent.log").read_text()
        gateway = start_gateway(home, [dbos_backend_url(db) + "?poll=0.3"])
        env = {**gateway.env(gateway.operator), "IRQ_HOME": str(home)}
        yield Fleet(gateway, work, env)
    finally:
        (work / "hold").unlink(missing_ok=True)
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


def test_a_failed_dbos_run_shows_its_error_and_failed_step(fleet: Fleet):
    run = eventually(lambda: fleet.runs().get(FAILED, {}).get("state") == "failed"
                     and fleet.runs()[FAILED], "the pipeline to fail")
    assert run["error"]["type"] == "RuntimeError"
    assert "read-only" in run["error"]["message"]
    assert run["error"]["step"] == "publish" and run["error"]["at"]
    assert run["last_step_at"]
    assert fleet.counts() == {"fetch_data": 1, "transform": 1, "publish": 1}


def test_dry_run_names_the_steps_kept_and_the_steps_that_run_again(fleet: Fleet):
    out = irq("retry", "pipeline-1", "--dry-run", "-o", "json", env=fleet.env)
    assert out.code == 0, out.stdout + out.stderr
    plan = json.loads(out.stdout)
    assert plan["action"] == "retry" and plan["targets"] == [FAILED]
    assert plan["steps_kept"] == ["fetch_data", "transform"]
    assert plan["will_rerun"] == ["publish"]
    assert plan["from_step"] == "publish" and plan["new_run"] is True
    assert any(e.startswith("publish") for e in plan["unjournaled_effects"])
    assert any("fork_workflow" in op for op in plan["operations"])
    # the text plan says the same in operator words
    text = irq("retry", "pipeline-1", "--from", "transform", "--dry-run", env=fleet.env)
    assert text.code == 0, text.stderr
    assert "steps kept" in text.stdout and "runs again" in text.stdout
    assert "happen twice" in text.stdout


def test_a_step_the_run_does_not_have_is_invalid_and_no_terminal_needs_yes(fleet: Fleet):
    out = irq("retry", "pipeline-1", "--from", "no_such_step", "--dry-run", env=fleet.env)
    assert out.code == 2, out.stdout + out.stderr
    assert "no step named 'no_such_step'" in out.stderr
    unconfirmed = irq("retry", "pipeline-1", env=fleet.env)
    assert unconfirmed.code == 2 and "--yes" in unconfirmed.stderr


def test_retrying_a_running_run_exits_4_and_changes_nothing(fleet: Fleet):
    eventually(lambda: fleet.runs().get(BUSY, {}).get("state") == "running", "busy running")
    before = set(fleet.runs())
    out = irq("retry", "busy-1", "--yes", "--reason", "try", env=fleet.env)
    assert out.code == 4, out.stdout + out.stderr
    assert "still running" in out.stdout and "irq cancel" in out.stdout
    plan = irq("retry", "busy-1", "--dry-run", "-o", "json", env=fleet.env)
    assert plan.code == 4 and "cancel it first" in plan.stderr
    assert set(fleet.runs()) == before and fleet.runs()[BUSY]["state"] == "running"


def test_retry_forks_a_new_run_that_reuses_the_first_two_steps(fleet: Fleet):
    (fleet.work / "fail").unlink()
    out = irq("retry", "pipeline-1", "--yes", "--reason", "warehouse fixed", "--key", "k-1",
              "--wait", "60", "-o", "json", env=fleet.env)
    assert out.code == 0, out.stdout + out.stderr
    answer = json.loads(out.stdout)
    (result,) = answer["results"]
    assert result["outcome"] == "applied" and result["action"] == "retry"
    new_run = result["new_run_id"]
    assert new_run and new_run != FAILED
    assert answer["waited"][0]["target"] == new_run and answer["waited"][0]["ok"]
    eventually(lambda: fleet.runs().get(new_run, {}).get("state") == "completed",
               "the new run to complete")
    assert fleet.counts() == {"fetch_data": 1, "transform": 1, "publish": 2}
    assert fleet.runs()[FAILED]["state"] == "failed"  # the original stays as it was

    # the same key again: replayed, nothing reaches DBOS, no third run
    runs_before = set(fleet.runs())
    again = irq("retry", "pipeline-1", "--yes", "--key", "k-1", "-o", "json", env=fleet.env)
    assert again.code == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)[0]["replayed"] is True
    assert set(fleet.runs()) == runs_before
    assert fleet.counts() == {"fetch_data": 1, "transform": 1, "publish": 2}
    # replayed with --wait: the journal kept the new run's id, so the replay names it and
    # waits for it (not for the original, which stays failed)
    waited = irq("retry", "pipeline-1", "--yes", "--key", "k-1", "--wait", "30", "-o", "json",
                 env=fleet.env)
    assert waited.code == 0, waited.stdout + waited.stderr
    replay = json.loads(waited.stdout)
    assert replay["results"][0]["replayed"] is True
    assert replay["results"][0]["new_run_id"] == new_run
    assert replay["waited"][0]["target"] == new_run and replay["waited"][0]["ok"]
    assert set(fleet.runs()) == runs_before

    audit = irq("audit", "--target", FAILED, "-o", "json", env=fleet.env)
    assert audit.code == 0, audit.stderr
    entries = [e for e in json.loads(audit.stdout) if e["outcome"] == "applied"]
    assert [e["action"] for e in entries] == ["retry"]
    assert entries[0]["reason"] == "warehouse fixed"
    assert entries[0]["plan"]["steps_kept"] == ["fetch_data", "transform"]
