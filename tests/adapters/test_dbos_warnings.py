"""Recoverability warnings for a DBOS run whose agent uses none of irq's helpers, through a
real gateway (``irq serve``) and the real CLI."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.processes import ChildProcess, stop_process
from tests.cli.cli_harness import irq, start_gateway

AGENT = Path(__file__).with_name("plain_dbos_agent.py")
REPO = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def test_a_plain_dbos_run_warns_of_no_heartbeat_timeout_and_an_unpinned_version(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sys.db"
    log = tmp_path / "agent.log"
    agent = ChildProcess(
        "plain-dbos-agent",
        [sys.executable, str(AGENT), str(db), "plain-1"],
        log,
        env={"PYTHONPATH": str(REPO)},
    )
    agent.start()
    home = tmp_path / "home"
    home.mkdir()
    gw = None
    try:
        wait_for(lambda: "ready" in log.read_text(errors="replace"), "the agent's workflow")
        gw = start_gateway(home, backends=[f"dbos+sqlite:///{db}"])
        env = {**gw.env(gw.operator), "IRQ_HOME": str(home), "COLUMNS": "220"}

        def warned() -> dict[str, Any] | None:
            out = irq("runs", "-o", "json", env=env)
            runs = {r["native_id"]: r for r in json.loads(out.stdout)} if out.code == 0 else {}
            run = runs.get("plain-1")
            return run if run and run["warnings"] else None

        run = wait_for(warned, "warnings on the run")
        assert run["state"] == "running" and run["heartbeat_timeout_s"] is None
        assert "no heartbeat timeout: a dead worker is noticed by silence only (no deadline)" in (
            run["warnings"]
        )
        # DBOS derived the version from the workflow source (an MD5 hex digest): not pinned
        assert re.fullmatch(r"[0-9a-f]{32}", run["app_version"]) and not run["version_pinned"]
        assert any(
            w.startswith(f"application version not pinned ({run['app_version']})")
            for w in run["warnings"]
        )
        shown = irq("show", "dbos:local/plain-1", env=env)
        assert "Recoverability warnings" in shown.stdout and "⚠ no heartbeat timeout" in (
            shown.stdout
        )
        # a pause plan says what an unpinned version does to the run it would resume later
        plan = json.loads(irq("pause", "dbos:local/plain-1", "--dry-run", "-o", "json",
                              env=env).stdout)
        assert any("application version not pinned: the run continues on whatever code" in w
                   for w in plan["warnings"]), plan
    finally:
        if gw is not None:
            stop_process(gw.process)
        agent.stop()
