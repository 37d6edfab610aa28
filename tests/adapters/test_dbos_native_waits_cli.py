"""A plain DBOS workflow's own ``DBOS.recv`` through a real gateway (``irq serve``) and the
real CLI: listed in the inbox as kind ``message``, shown with its wait site, answered with
``irq respond ITEM --json PAYLOAD --topic TOPIC`` once (a second respond is refused)."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.processes import ChildProcess, stop_process
from tests.cli.cli_harness import irq, start_gateway

AGENT = Path(__file__).with_name("plain_recv_agent.py")
REPO = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def test_irq_respond_answers_a_plain_recv_once(tmp_path: Path) -> None:
    db = tmp_path / "sys.db"
    log = tmp_path / "agent.log"
    agent = ChildProcess(
        "plain-recv-agent", [sys.executable, str(AGENT), str(db), "cli-1"], log,
        env={"PYTHONPATH": str(REPO)},
    )
    agent.start()
    home = tmp_path / "home"
    home.mkdir()
    gw = None
    try:
        wait_for(lambda: "ready" in log.read_text(errors="replace"), "the agent's workflow")
        gw = start_gateway(home, backends=[f"dbos+sqlite:///{db}?poll=0.5"])
        env = {**gw.env(gw.operator), "IRQ_HOME": str(home), "COLUMNS": "220"}

        def listed() -> dict[str, Any] | None:
            out = irq("inbox", "-o", "json", env=env)
            items = json.loads(out.stdout) if out.code == 0 else []
            return next((i for i in items if i["run_id"] == "dbos:local/cli-1"), None)

        item = wait_for(listed, "the recv in the inbox")
        assert item["kind"] == "message" and item["native_id"] == "recv:2"
        assert item["deadline_at"] and "topic not recorded by DBOS" in item["wait_site"]
        shown = irq("show", "dbos:local/cli-1", env=env)
        assert "wait for message (DBOS.recv)" in shown.stdout, shown.stdout
        answer = {"approved": True, "note": "ok from the CLI"}
        out = irq("respond", item["id"], "--json", json.dumps(answer), "--topic", "approval",
                  "--yes", "-o", "json", env=env)
        assert out.code == 0, out.stdout + out.stderr
        again = irq("respond", item["id"], "--json", json.dumps(answer), "--topic", "approval",
                    "--yes", "-o", "json", env=env)
        assert again.code != 0, again.stdout

        def finished() -> str | None:
            with sqlite3.connect(db) as conn:
                row = conn.execute(
                    "SELECT status FROM workflow_status WHERE workflow_uuid = 'cli-1'"
                ).fetchone()
            return row[0] if row and row[0] == "SUCCESS" else None

        wait_for(finished, "the workflow to finish")
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT topic, consumed FROM notifications WHERE destination_uuid = 'cli-1'"
            ).fetchall()
        assert rows == [("approval", 1)]
    finally:
        if gw is not None:
            stop_process(gw.process)
        agent.stop()
