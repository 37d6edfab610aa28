"""``--wait SECONDS`` against a real gateway and a real DBOS agent: a pause returns once the
agent confirmed its releases (the lock released, the GPU kept), a resume once the run runs
again, a decision once the agent consumed it (one by id, two by ``--filter 'tool:deploy'``);
a pause whose agent is SIGSTOPped never gets its release confirmed and times out with exit 7
(the agent is resumed with SIGCONT after)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from bulk_fleet import BulkFleet, Scope, bulk_fleet, eventually
from cli_harness import irq

pytestmark = [pytest.mark.slow]

RUN = "dbos:solo/wf-solo-gpu-00"
ASKING = "dbos:asks/wf-asks-gpu-00"  # one of three asking runs


@pytest.fixture
def fleet(irq_home: Path) -> Iterator[BulkFleet]:
    with bulk_fleet(irq_home, [Scope("solo", gpu=1), Scope("asks", gpu=3, ask=True)]) as f:
        yield f


def test_wait_returns_when_released_and_times_out_when_the_agent_is_stopped(fleet: BulkFleet):
    env = fleet.env()

    # pause --wait: returns once the gateway saw the agent confirm the release
    paused = irq("pause", RUN, "--yes", "--wait", "30", "-o", "json", env=env)
    assert paused.code == 0, paused.stdout + paused.stderr
    out = json.loads(paused.stdout)
    assert [r["outcome"] for r in out["results"]] == ["applied"]
    (waited,) = out["waited"]
    assert waited["target"] == RUN and waited["ok"] and waited["outcome"] == "paused"
    # when it returned, the agent had released the lock and kept the GPU, and said so
    assert ("wf-solo-gpu-00", "db-lock") in fleet.released("solo")
    assert ("wf-solo-gpu-00", "gpu-0") not in fleet.released("solo")
    view = fleet.view()
    assert view.runs[RUN].state.value == "paused"
    held = {r.id: r.state for r in view.runs[RUN].resources}
    assert held == {"gpu-0": "held", "db-lock": "released"}

    # resume --wait (text): returns when it runs again, with a table of what was observed
    resumed = irq("resume", RUN, "--yes", "--wait", "30", env=env)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert "OBSERVED" in resumed.stdout and "running" in resumed.stdout

    # a decision --wait returns once the agent consumed it
    eventually(lambda: ASKING + "#" in " ".join(fleet.view().interrupts), "the interrupt")
    eventually(lambda: len(fleet.view().pending_interrupts()) == 3, "three interrupts")
    (intr_id,) = [i for i in fleet.view().interrupts if i.startswith(ASKING)]
    approved = irq("approve", intr_id, "--yes", "--wait", "30", "-o", "json", env=env)
    assert approved.code == 0, approved.stdout + approved.stderr
    (consumed,) = json.loads(approved.stdout)["waited"]
    assert consumed["ok"] and consumed["state"] in ("decided", "gone")

    # decisions by filter: the other two deploys rejected at once, --wait until consumed
    rejected = irq(
        "reject", "--filter", "ctx:asks tool:deploy", "--feedback", "deploy freeze",
        "--yes", "--wait", "30", "-o", "json", env=env,
    )
    assert rejected.code == 0, rejected.stdout + rejected.stderr
    out = json.loads(rejected.stdout)
    assert len(out["results"]) == 2 and intr_id not in {r["target"] for r in out["results"]}
    assert all(r["outcome"] == "applied" for r in out["results"])
    assert all(w["ok"] and w["outcome"] == "consumed" for w in out["waited"])
    assert not fleet.view().pending_interrupts()
    eventually(
        lambda: sorted(e["approved"] for e in fleet.events("asks") if e["event"] == "decision")
        == [False, False, True],
        "the agent to get one approval and two rejections",
        15,
    )

    # the agent is stopped: nobody confirms the release, the wait times out with exit 7
    # (after the resume: its agent beats again and holds the lock again, so no beat from the
    # first pause is left to confirm the next one)
    def running_with_lock() -> bool:
        run = fleet.view().runs[RUN]
        lock = {r.id: r.state for r in run.resources}.get("db-lock")
        return run.state.value == "running" and lock == "held"

    eventually(running_with_lock, "the resumed run holding its lock again", 30)
    pid = fleet.agents["solo"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        stuck = irq("pause", RUN, "--yes", "--wait", "3", env=env)
        assert stuck.code == 7, stuck.stdout + stuck.stderr
        assert "timed out" in stuck.stderr and RUN in stuck.stderr  # plain lines: no terminal
        assert "applied" in stuck.stdout  # the pause itself was applied
        assert fleet.view().runs[RUN].state.value == "pausing"  # release not confirmed
    finally:
        os.kill(pid, signal.SIGCONT)
    # once it runs again the agent confirms the release after all (before the gateway's
    # release deadline): paused, lock released, no suspected leak
    def confirmed() -> bool:
        run = fleet.view().runs[RUN]
        states = {r.id: r.state for r in run.resources}
        return run.state.value == "paused" and states.get("db-lock") == "released"

    eventually(confirmed, "the continued agent to confirm the release", 14)
