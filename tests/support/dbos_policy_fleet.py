"""A DBOS agent whose tool calls go through irq's policy guard (dbos_policy_agent.py, a
process on its own SQLite database, stopped by its pid), as tests drive it: start it, enqueue
a plan of tool calls, read its own record of what really ran."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbos import DBOSClient

from console.processes import stop_process
from tests.support.dbos_policy_agent import APP_VERSION, QUEUE, WORKFLOW_NAME

ROOT = Path(__file__).resolve().parents[2]
AGENT_SCRIPT = Path(__file__).with_name("dbos_policy_agent.py")


def wait_until_up(
    process: subprocess.Popen[bytes], output: Path, ready: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if ready():
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"{output.name}: did not start:\n" + output.read_text()[-3000:])


@dataclass
class PolicyAgent:
    """One tests/support/dbos_policy_agent.py process on its own SQLite database."""

    root: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    @property
    def db(self) -> Path:
        return self.root / "sys.db"

    @property
    def record(self) -> Path:
        return self.root / "record.jsonl"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        out = self.root / "agent.out"
        offset = out.stat().st_size if out.exists() else 0
        env = {k: v for k, v in os.environ.items() if not k.startswith("IRQ_AGENT_")}
        with out.open("ab") as sink:
            self.process = subprocess.Popen(
                [sys.executable, str(AGENT_SCRIPT), "--db", str(self.db)],
                cwd=ROOT,
                env={**env, **self.env},
                stdout=sink,
                stderr=sink,
            )
        wait_until_up(self.process, out, lambda: b"ready (pid" in out.read_bytes()[offset:])

    def stop(self) -> None:
        if self.process:
            stop_process(self.process)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def run(self, calls: list[dict[str, Any]], **plan: Any) -> str:
        wid = f"p-{uuid.uuid4().hex[:10]}"
        client = DBOSClient(system_database_url=f"sqlite:///{self.db}")
        try:
            client.enqueue(
                {
                    "queue_name": QUEUE,
                    "workflow_name": WORKFLOW_NAME,
                    "workflow_id": wid,
                    "app_version": APP_VERSION,
                },
                {"record": str(self.record), "calls": calls, **plan},
            )
        finally:
            client.destroy()
        return wid

    def entries(self, wid: str) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        lines = self.record.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e.get("wid") == wid]

    def side_effects(self, wid: str) -> list[dict[str, Any]]:
        return [e for e in self.entries(wid) if e["kind"] == "side_effect"]

    async def finished(self, wid: str, timeout_s: float = 30) -> list[dict[str, Any]]:
        """The run's outcome lines, once it recorded them (its last step)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            entries = self.entries(wid)
            if any(e["kind"] == "obligations" for e in entries):
                return entries
            await asyncio.sleep(0.1)
        raise AssertionError(f"{wid} did not finish:\n" + (self.root / "agent.out").read_text())
