"""``irq runs --watch`` / ``irq inbox --watch`` against a real gateway: JSON lines per change
with -o jsonl (a real DBOS agent's run and interrupt), the in-place table on a pseudo-terminal,
the refusal on a pipe, and the screen the terminal path draws."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pty
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from cli_harness import ROOT, ServedGateway, irq
from test_cli_with_dbos_agent import INTERRUPT_ID, RUN_ID, Fleet, eventually, fleet

from console.cli.live_tables import ChangeFeed, TableSpec, render_screen
from console.cli.runs import runs_table, select_runs
from console.client import ConnectionStatus, FleetView, GatewayClient
from console.processes import stop_process

__all__ = ["fleet"]  # the real DBOS fleet fixture, shared with the CLI end-to-end test


class Lines:
    """The JSON lines a watcher subprocess writes, read on a thread."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, **env}, cwd=ROOT)
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.queue.put(json.loads(line))

    def wait_for(self, check: Any, what: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                item = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(item)
            if check(item):
                return item
        raise AssertionError(f"no line for {what} in {timeout}s; saw {self.seen}")

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(10)
        finally:
            stop_process(self.proc)


def test_jsonl_emits_an_upsert_per_item_then_one_per_change(fleet: Fleet) -> None:
    env = fleet.env()

    def pending() -> list[dict[str, Any]]:
        return json.loads(irq("inbox", "-o", "json", env=env).stdout)

    eventually(pending, "the interrupt in the inbox")
    runs = Lines("runs", "--watch", "-o", "jsonl", env=env)
    inbox = Lines("inbox", "--watch", "-o", "jsonl", env=env)
    try:
        first_run = runs.wait_for(lambda c: c["data"].get("id") == RUN_ID, "the run's first line")
        assert first_run["change"] == "upsert" and first_run["kind"] == "run"
        assert first_run["data"]["interrupts"] == [INTERRUPT_ID]
        first = inbox.wait_for(lambda c: c["data"].get("id") == INTERRUPT_ID, "the interrupt")
        assert first == {"change": "upsert", "kind": "interrupt", "data": first["data"]}
        assert first["data"]["status"] == "pending"

        approved = irq("approve", INTERRUPT_ID, "--reason", "watch test", "--yes", env=env)
        assert approved.code == 0, approved.stderr

        removed = inbox.wait_for(lambda c: c["change"] == "remove", "the decided interrupt")
        assert removed == {"change": "remove", "kind": "interrupt", "data": {"id": INTERRUPT_ID}}
        changed = runs.wait_for(
            lambda c: c["data"].get("id") == RUN_ID and c["data"]["interrupts"] == [],
            "the run upserted without its interrupt")
        assert changed["change"] == "upsert"
        assert inbox.interrupt() == 0 and runs.interrupt() == 0  # ctrl-c ends with 0
    finally:
        stop_process(runs.proc)
        stop_process(inbox.proc)

    # the terminal path draws the non-watch table under the header, from a real snapshot
    async def snapshot() -> FleetView:
        async with GatewayClient(fleet.gateway.url, fleet.gateway.operator,
                                 subscribe=False) as client:
            return client.view

    view = asyncio.run(snapshot())
    spec = TableSpec(kind="run", title="irq runs --watch", noun="runs",
                     select=lambda v: select_runs(v, set(), None), table=runs_table)
    live = _draw(spec, view, fleet.gateway.url, ConnectionStatus("live"))
    header, *rest = live.splitlines()
    assert "irq runs --watch" in header and "live" in header and "1 runs" in header
    table = "\n".join(rest)
    for column in ("ID", "NAME", "STATE", "HEARTBEAT", "PROGRESS", "RESOURCES", "INBOX"):
        assert column in table
    assert RUN_ID in table
    down = _draw(spec, view, fleet.gateway.url,
                 ConnectionStatus("reconnecting", "connection lost", attempts=3))
    assert "reconnecting, attempt 3: connection lost" in down.splitlines()[0]
    assert RUN_ID in down  # the last table stays while it reconnects


def _draw(spec: TableSpec, view: FleetView, url: str, status: ConnectionStatus) -> str:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render_screen(spec, view, url, status))
    return out.getvalue()


def test_change_feed_ignores_ages_and_reports_removals() -> None:
    feed = ChangeFeed("run")
    item = {"id": "dbos:local/a", "state": "running", "heartbeat_age_s": 1.0}
    assert feed.changes([item]) == [{"change": "upsert", "kind": "run", "data": item}]
    assert feed.changes([{**item, "heartbeat_age_s": 9.0}]) == []  # only the clock moved
    paused = {**item, "state": "paused"}
    assert feed.changes([paused]) == [{"change": "upsert", "kind": "run", "data": paused}]
    assert feed.changes([]) == [{"change": "remove", "kind": "run",
                                 "data": {"id": "dbos:local/a"}}]


def test_text_watch_refuses_a_pipe_and_json(served_gateway: ServedGateway) -> None:
    env = served_gateway.env(served_gateway.viewer)
    piped = irq("runs", "--watch", env=env)
    assert piped.code == 2
    assert "needs a terminal" in piped.stderr and "-o jsonl" in piped.stderr
    as_json = irq("inbox", "--watch", "-o", "json", env=env)
    assert as_json.code == 2 and "-o jsonl" in as_json.stderr


def test_text_watch_draws_in_place_on_a_terminal_and_ctrl_c_exits_0(
        served_gateway: ServedGateway) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli.app", "inbox", "--watch"], stdin=slave,
        stdout=slave, stderr=slave, cwd=ROOT,
        env={**os.environ, **served_gateway.env(served_gateway.viewer), "COLUMNS": "120",
             "LINES": "30", "TERM": "xterm"})
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"live" not in seen or b"no interrupts" not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                seen += os.read(master, 65536)
        assert b"irq inbox --watch" in seen and b"0 interrupts" in seen
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        stop_process(proc)
        os.close(master)


def test_the_screen_says_when_a_backend_is_unreachable_or_nothing_is_listed() -> None:
    from console.model import BackendHealth

    spec = TableSpec(kind="run", title="irq runs --watch", noun="runs",
                     select=lambda v: select_runs(v, set(), None), table=runs_table)
    view = FleetView()
    waiting = _draw(spec, view, "ws://gw", ConnectionStatus("connecting"))
    assert "connecting" in waiting and "waiting for the gateway" in waiting
    health = BackendHealth(backend="dbos", context="prod", url="sqlite", reachable=False,
                           error="database is locked")
    view.backends[health.key] = health
    view.received_at = datetime.now(UTC)
    screen = _draw(spec, view, "ws://gw", ConnectionStatus("live"))
    assert "backend dbos:prod is unreachable: database is locked" in screen
    assert "0 runs" in screen and "no runs" in screen


def test_jsonl_watch_survives_a_gateway_restart_and_exits_6_without_one(
        served_gateway: ServedGateway) -> None:
    from cli_harness import start_gateway

    from console.gateway.auth import create_token, read_last_use, token_id, tokens_path
    from console.model import Role

    # the watch's own token: the gateway notes its first accepted handshake in
    # tokens-used.json, the event that says the watch is connected (no sleep)
    watcher = create_token(Role.VIEWER, "jsonl-watcher", served_gateway.home)
    watcher_id = next(token_id(e) for e in json.loads(tokens_path(served_gateway.home)
                                                      .read_text())
                      if e["identity"] == "jsonl-watcher")
    env = {**os.environ, **served_gateway.env(watcher)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli.app", "runs", "--watch", "-o", "jsonl"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT,
        env=env)
    errors: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            errors.put(line)

    def stderr_until(text: bytes, timeout: float = 20) -> None:
        seen = b""
        deadline = time.monotonic() + timeout
        while text not in seen:
            assert time.monotonic() < deadline, seen
            with contextlib.suppress(queue.Empty):
                seen += errors.get(timeout=0.2)

    threading.Thread(target=read, daemon=True).start()
    restarted = None
    try:
        deadline = time.monotonic() + 30
        while watcher_id not in read_last_use(served_gateway.home):  # connected
            assert proc.poll() is None, b"".join(list(errors.queue))
            assert time.monotonic() < deadline, "the watch never connected"
            time.sleep(0.05)
        assert proc.poll() is None  # connected and quiet: nothing to list, it goes on
        stop_process(served_gateway.process)
        stderr_until(b"reconnecting (attempt 1)")
        restarted = start_gateway(served_gateway.home, port=served_gateway.port)
        stderr_until(b"reconnected to")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        stop_process(proc)
        if restarted is not None:
            stop_process(restarted.process)
    nobody = subprocess.run(
        [sys.executable, "-m", "console.cli.app", "inbox", "--watch", "-o", "jsonl"],
        capture_output=True, text=True, cwd=ROOT, timeout=30, stdin=subprocess.DEVNULL,
        env={**env, "IRQ_URL": served_gateway.url})
    assert nobody.returncode == 6, nobody.stderr
