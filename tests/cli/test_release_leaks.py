"""``irq leaks`` and ``irq release --force`` end to end on a real DBOS agent (SQLite; nothing
mocked): a run that ended still holding a GPU, a licence seat and a scratch disk is listed as
leaking them; the licence goes back through the config's release_command (a script that
records its arguments: called once, audited; nothing reports it free, so it stays a
suspected leak); the GPU through the agent's release callback (its next report says released:
verified, no longer listed); the disk has no release declared: refused, naming both ways.

One gateway and one agent for the module (the tests run in order on one fleet).
"""

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
from cli_harness import ROOT, ServedGateway, irq, start_gateway

from console.processes import free_port, stop_process

pytestmark = [pytest.mark.slow]

RUN = "dbos:local/trainer-1"


@dataclass
class Fleet:
    gateway: ServedGateway
    work: Path
    env: dict[str, str]

    def leaks(self) -> dict[str, dict[str, Any]]:
        out = irq("leaks", "-o", "json", env=self.env)
        assert out.code == 0, out.stderr
        return {leak["resource"]: leak for leak in json.loads(out.stdout)
                if leak["run"] == RUN}

    def events(self) -> list[dict[str, Any]]:
        path = self.work / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() \
            else []


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


FREE_LICENSE = """\
import json, os, sys
with open({calls!r}, "a") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "run": os.environ["IRQ_RUN_ID"],
                          "kind": os.environ["IRQ_RESOURCE_KIND"]}}) + "\\n")
print("seat returned to the pool")
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from console.demo.launcher import dbos_backend_url
    from console.gateway.auth import create_token
    from console.model import Role

    home = tmp_path_factory.mktemp("leak-home")
    work = tmp_path_factory.mktemp("leak-work")
    script = work / "free_license.py"
    script.write_text(FREE_LICENSE.format(calls=str(work / "calls.jsonl")))
    (home / "config.toml").write_text(
        "[resources.license]\n"
        f"release_command = [{json.dumps(sys.executable)}, {json.dumps(str(script))}, "
        '"--pool", "eu"]\n')
    db = work / "agent.db"
    port = free_port()
    token = create_token(Role.AGENT, "leak-test-agent", home)
    log = open(work / "agent.log", "ab")  # noqa: SIM115 - closed below
    agent = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("dbos_leak_agent.py")), "--db", str(db),
         "--events", str(work / "events.jsonl"), "--go", str(work / "go")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("IRQ_")},
             "IRQ_AGENT_URL": f"ws://127.0.0.1:{port}/agent", "IRQ_AGENT_TOKEN": token,
             "PYTHONPATH": str(ROOT)},
    )
    gateway: ServedGateway | None = None
    try:
        eventually(lambda: db.exists() or agent.poll() is not None, "the agent's database")
        assert agent.poll() is None, (work / "agent.log").read_text()
        gateway = start_gateway(home, [dbos_backend_url(db) + "?poll=0.3"], port=port)
        (work / "go").touch()  # the workflow starts, and its first beat finds the gateway up
        env = {**gateway.env(gateway.operator), "IRQ_HOME": str(home)}
        yield Fleet(gateway, work, env)
    finally:
        stop_process(agent)
        log.close()
        if gateway is not None:
            stop_process(gateway.process)


def test_leaks_lists_the_resources_of_a_run_that_ended_holding_them(fleet: Fleet) -> None:
    leaks = eventually(lambda: len(fleet.leaks()) == 3 and fleet.leaks(), "three leaks")
    gpu = leaks["gpu-7"]
    assert gpu["kind"] == "gpu" and gpu["reason"] == "run_ended"
    assert gpu["run_state"] == "completed" and gpu["age_s"] is not None


def test_a_forced_release_runs_the_configured_command_once_and_is_audited(fleet: Fleet) -> None:
    refused = irq("release", RUN, "lic-1", "--yes", env=fleet.env)
    assert refused.code == 2 and "--force" in refused.stderr
    plan = irq("release", RUN, "lic-1", "--dry-run", "-o", "json", env=fleet.env)
    assert plan.code == 0, plan.stderr
    assert plan.stdout.count("free_license.py") == 1
    assert "--pool eu dbos:local/trainer-1 lic-1" in json.loads(plan.stdout)["operations"][0]
    assert not (fleet.work / "calls.jsonl").exists()  # a dry run calls nothing

    out = irq("release", RUN, "lic-1", "--force", "--yes", "--reason", "seat reclaim",
              "-o", "json", env=fleet.env)
    assert out.code == 0, out.stdout + out.stderr
    [result] = json.loads(out.stdout)
    assert result["action"] == "release" and result["outcome"] == "applied"
    release = result["release"]
    assert release["way"] == "command" and release["exit_code"] == 0
    assert release["output"] == ["seat returned to the pool"]
    # the agent still reports the seat held: not verified, it stays a suspected leak
    assert release["verified"] is False and "not yet verified" in result["detail"]
    calls = [json.loads(line) for line in (fleet.work / "calls.jsonl").read_text().splitlines()]
    assert calls == [{"argv": ["--pool", "eu", RUN, "lic-1"], "run": RUN, "kind": "license"}]
    assert fleet.leaks()["lic-1"]["reason"] == "no_release_report"

    audit = irq("audit", "--target", RUN, "-o", "json", env=fleet.env)
    assert audit.code == 0, audit.stderr
    [entry] = [e for e in json.loads(audit.stdout) if e["action"] == "release"]
    assert entry["reason"] == "seat reclaim" and entry["outcome"] == "applied"
    assert "lic-1" in entry["detail"] and "(exit 0)" in entry["detail"]
    assert "seat returned to the pool" in entry["detail"]


def test_a_forced_release_through_the_agent_callback_is_verified_by_its_next_report(
        fleet: Fleet) -> None:
    none = irq("release", RUN, "scratch-1", "--force", "--yes", env=fleet.env)
    assert none.code != 0
    said = none.stdout + none.stderr
    assert "release_command" in said and "on_release" in said

    out = irq("release", RUN, "gpu-7", "--force", "--yes", "--reason", "node drain",
              "-o", "json", env=fleet.env)
    assert out.code == 0, out.stdout + out.stderr
    [result] = json.loads(out.stdout)
    assert result["outcome"] == "applied" and result["release"]["way"] == "agent"
    assert result["release"]["verified"] is True and "verified" in result["detail"]
    freed = [e for e in fleet.events() if e["event"] == "forced_release"]
    assert [(e["run"], e["resource"], e["reason"]) for e in freed] == [
        ("trainer-1", "gpu-7", "node drain")]
    # the verifying beat reaches the fleet's snapshot at the next merge (beats are coalesced)
    eventually(lambda: "gpu-7" not in fleet.leaks(), "gpu-7 off the leak list", timeout=15)


async def test_L_in_the_console_shows_the_release_plan_defaults_to_no_then_releases(
        fleet: Fleet) -> None:
    """The console's way to the same release: ``L`` on the run's detail picks its first
    suspected leak (the licence seat: its earlier release was not verified), the dialog shows
    the gateway's plan (the configured command), No sends nothing, Yes runs the command once
    more; ``:release`` names the disk, whose plan asks the agent, which has no callback for
    it: the results say so, naming both ways to declare a release."""
    from console.leak_rule import leak_reason
    from console.tui.app import IrqApp
    from console.tui.fleet_source import LiveSource
    from console.tui.screens.run_detail import RunDetailScreen
    from console.tui.widgets.confirm_dialog import ConfirmDialog
    from console.tui.widgets.results_dialog import ResultsDialog
    from tests.tui.tui_pilot import type_text, until

    calls = fleet.work / "calls.jsonl"
    before = calls.read_text().splitlines() if calls.exists() else []
    app = IrqApp(LiveSource(fleet.gateway.url, fleet.gateway.operator), context="test")
    async with app.run_test(size=(100, 32)) as pilot:
        await until(pilot, lambda: RUN in app.view.runs, "the run in the fleet", 30)
        app.open_run(RUN)
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "the run's detail")
        detail = app.screen
        shown = app.view.runs[RUN]
        leaks = [r.id for r in shown.resources if leak_reason(r.state, shown.state.value)]
        assert leaks[0] == "lic-1" and "gpu-7" not in leaks

        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the release dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog) and dialog.targets == [RUN]
        assert dialog.plan is not None and "free_license.py" in " ".join(dialog.plan.operations)
        await pilot.press("enter")  # the reason hands over to No ...
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("enter")  # ... and No sends nothing
        await until(pilot, lambda: app.screen is detail and not app.mutation_pending,
                    "the dialog closed")
        assert calls.read_text().splitlines() == before

        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the release dialog")
        await type_text(pilot, "seat still out")
        await pilot.press("tab", "tab", "enter")  # No, then Yes
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "the results")
        results = app.screen
        assert isinstance(results, ResultsDialog)
        (result,) = results.results
        assert (result.action, result.target, result.outcome) == ("release", RUN, "applied")
        assert len(calls.read_text().splitlines()) == len(before) + 1
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is detail and not app.mutation_pending,
                    "the results closed")

        await pilot.press("colon")
        await type_text(pilot, "release scratch-1")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the release dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog) and dialog.plan is not None
        assert "ask the agent" in " ".join(dialog.plan.operations)  # no release_command
        await type_text(pilot, "disk too")
        await pilot.press("tab", "tab", "enter")
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "the results")
        results = app.screen
        assert isinstance(results, ResultsDialog)
        (result,) = results.results
        # the agent has no callback for the disk: refused, naming both ways to declare one
        assert result.outcome != "applied"
        assert "release_command" in (result.detail or "") and "on_release" in (
            result.detail or "")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is detail and not app.mutation_pending,
                    "the results closed")
