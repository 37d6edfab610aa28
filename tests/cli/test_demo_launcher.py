"""``irq demo``: demo context and tokens under IRQ_HOME, a gateway subprocess that answers,
and every child stopped by its pid on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_harness import ROOT, RUN_FIELDS, irq

from console.config import Config, Context, load_config, save_config
from console.demo.launcher import (
    DEMO_CONTEXT,
    DemoPaths,
    dbos_backend_url,
    demo_paths,
    ensure_tokens,
    port_is_free,
    write_demo_context,
)
from console.gateway.auth import TokenStore, tokens_path
from console.model import Role
from console.processes import free_port, pid_alive


def test_demo_paths_live_under_irq_home(irq_home: Path):
    paths = demo_paths()
    assert paths.root == irq_home / "demo"
    assert paths.db == irq_home / "demo" / "fleet.db"


def test_the_dbos_backend_url_names_the_database_by_absolute_path(tmp_path: Path):
    url = dbos_backend_url(tmp_path / "fleet.db")
    assert url == f"dbos+sqlite:///{tmp_path}/fleet.db"
    assert url.startswith("dbos+sqlite:////")  # SQLAlchemy's absolute form


def test_demo_context_becomes_current_when_none_is(irq_home: Path):
    current, other = write_demo_context("ws://127.0.0.1:7433", "irq_x", ["dbos+sqlite:////x.db"])
    assert current and other is None
    config = load_config()
    assert config.current_context == DEMO_CONTEXT
    ctx = config.contexts[DEMO_CONTEXT]
    assert (ctx.url, ctx.token, ctx.backends) == (
        "ws://127.0.0.1:7433",
        "irq_x",
        ["dbos+sqlite:////x.db"],
    )


def test_demo_context_does_not_take_over_another_current_context(irq_home: Path):
    save_config(Config(current_context="prod", contexts={"prod": Context("prod", "wss://p")}))
    current, other = write_demo_context("ws://127.0.0.1:7500", "irq_y", [])
    assert not current and other == "prod"
    config = load_config()
    assert config.current_context == "prod"
    assert config.contexts["prod"].url == "wss://p"
    assert config.contexts[DEMO_CONTEXT].url == "ws://127.0.0.1:7500"


def test_demo_tokens_are_an_operator_and_an_agent_token_reused_across_runs(irq_home: Path):
    paths = DemoPaths(irq_home / "demo")
    paths.root.mkdir()
    first = ensure_tokens(paths)
    store = TokenStore(tokens_path())
    operator = store.authenticate(first.operator)
    agent = store.authenticate(first.agent)
    assert operator is not None and operator.role is Role.OPERATOR
    assert agent is not None and agent.role is Role.AGENT
    assert ensure_tokens(paths) == first
    assert len(json.loads(tokens_path().read_text())) == 2
    assert paths.tokens.stat().st_mode & 0o077 == 0


def test_port_is_free_sees_a_listening_socket():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert not port_is_free(sock.getsockname()[1])


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_demo_without_tui_serves_the_cli_and_stops_its_children_on_sigterm(irq_home: Path):
    port = free_port()
    log = irq_home / "demo-launcher.err"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "console.cli.app", "demo", "--no-tui", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "IRQ_HOME": str(irq_home)},
            cwd=ROOT,
        )
    try:
        _wait_for(
            lambda: "irq demo is up" in log.read_text() or proc.poll() is not None,
            90,
            "the demo to come up",
        )
        text = log.read_text()
        assert proc.poll() is None, text
        assert "gateway" in text and str(irq_home / "demo" / "gateway.log") in text

        config = load_config()
        assert config.current_context == DEMO_CONTEXT
        assert config.contexts[DEMO_CONTEXT].url == f"ws://127.0.0.1:{port}"
        backends = config.contexts[DEMO_CONTEXT].backends
        assert backends[0] == dbos_backend_url(irq_home / "demo" / "fleet.db")
        # the temporal, langgraph and restate extras are part of `make test`: the demo starts
        # Temporal agents, a LangGraph Agent Server and a Restate server too
        assert len(backends) == 4 and backends[1].startswith("temporal+http://127.0.0.1:")
        assert backends[2].startswith("langgraph+http://127.0.0.1:")
        assert backends[3].startswith("restate+http://127.0.0.1:")

        # the demo context just works: the CLI lists the fleet's real runs, from both backends
        seen: dict[str, list[dict]] = {}

        def runs_of_both_backends() -> bool:
            runs = irq("runs", "-o", "json")
            assert runs.code == 0, runs.stderr
            listed = json.loads(runs.stdout)
            assert isinstance(listed, list), runs.stdout
            seen["runs"] = listed
            return {"dbos", "temporal"} <= {run["backend"] for run in listed}

        _wait_for(runs_of_both_backends, 60, "runs of both backends in `irq runs`")
        for run in seen["runs"]:
            assert RUN_FIELDS <= set(run), run
            assert run["id"] and run["native_id"] and run["state"], run
        _the_failed_close_is_retried_to_completion(irq_home / "demo")
        # nothing the demo and its children wrote is readable by others (SECURITY.md)
        exposed = []
        for path in (irq_home / "demo").rglob("*"):
            with contextlib.suppress(FileNotFoundError):  # reservations come and go
                mode = path.lstat().st_mode
                if stat.S_ISREG(mode) and mode & 0o077:
                    exposed.append(f"{oct(mode & 0o777)} {path}")
        assert not exposed, exposed

        pids = [
            int(line.split("pid ")[1].split()[0])
            for line in text.splitlines()
            if line.strip().startswith(("gateway", "fleet", "temporal", "t-worker", "langgraph",
                                        "lg-feed"))
            and "pid " in line
        ]
        assert pids, text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(40)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, log.read_text()
    for pid in pids:
        assert not pid_alive(pid), f"child {pid} survived the demo"


def _the_failed_close_is_retried_to_completion(demo_dir: Path) -> None:
    """The showcase's month-end close fails in its last step with the reports API's 503 (the
    error names the step); `irq retry` forks it and the fork completes, publishing the
    report without fetching or reconciling again."""
    close = "dbos:local/month-end-close-0001"
    failed: dict[str, dict] = {}

    def close_failed() -> bool:
        runs = {r["id"]: r for r in json.loads(irq("runs", "-o", "json").stdout)}
        failed.update(runs.get(close) or {})
        return failed.get("state") == "failed"

    _wait_for(close_failed, 60, "the month-end close to fail")
    assert failed["error"]["step"] == "publish_report", failed
    assert "503 from reports-api" in failed["error"]["message"], failed
    shown = irq("show", close)
    assert "ConnectionError in step publish_report: upstream 503" in shown.stdout, shown.stdout
    plan = irq("retry", close, "--dry-run", "-o", "json")
    assert plan.code == 0, plan.stdout + plan.stderr
    assert json.loads(plan.stdout)["steps_kept"] == ["fetch_invoices", "reconcile"], plan.stdout
    retry = irq("retry", close, "--yes", "--reason", "reports-api is back", "--wait", "60",
                "-o", "json")
    assert retry.code == 0, retry.stdout + retry.stderr
    (result,) = json.loads(retry.stdout)["results"]
    assert result["outcome"] == "applied" and result["new_run_id"], result
    _wait_for(lambda: any(s["state"] == "completed" for s in json.loads(
        irq("runs", "-o", "json").stdout) if s["id"] == result["new_run_id"]), 30,
        "the retried close to complete")
    assert list((demo_dir / "outbox" / "month-end-close-0001").glob("month-end-*.json"))


def _read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    import select

    buf = b""
    deadline = time.monotonic() + timeout
    while marker not in buf and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                break
    return buf


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_demo_with_the_tui_on_a_terminal_stops_every_child_on_a_signal(
    irq_home: Path, sig: signal.Signals
):
    """SIGTERM (or SIGHUP: the terminal went away) while the TUI runs: no child survives."""
    import pty

    port = free_port()
    pid, fd = pty.fork()
    if pid == 0:  # the child: irq demo on a pseudo-terminal
        os.chdir(ROOT)
        os.environ["IRQ_HOME"] = str(irq_home)
        os.execv(
            sys.executable, [sys.executable, "-m", "console.cli.app", "demo", "--port", str(port)]
        )
    try:
        out = _read_until(fd, b"Opening the terminal UI", 90)
        text = out.decode(errors="replace")
        assert "irq demo is up" in text, text
        pids = [
            int(line.split("pid ")[1].split()[0])
            for line in text.splitlines()
            if line.strip().startswith(("gateway", "fleet", "temporal", "t-worker"))
            and "pid " in line
        ]
        assert len(pids) == 4, text  # gateway, fleet, temporal server, t-worker
        _read_until(fd, b"\x00never", 3)  # let the TUI start and connect
        if sig is signal.SIGHUP:
            os.close(fd)
        os.kill(pid, sig)
        deadline = time.monotonic() + 40
        reaped: int | None = None  # the exit status, once the demo has really exited
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                reaped = status
                break
            if sig is not signal.SIGHUP:
                _read_until(fd, b"\x00never", 0.2)  # keep the pty drained
            else:
                time.sleep(0.2)
        # waitpid(WNOHANG) answers (0, 0) while the child runs: a hang must not read as "exit 0"
        assert reaped is not None, f"irq demo still running 40 s after {sig.name}"
        assert os.WIFEXITED(reaped), f"irq demo ended by a signal: status {reaped}"
        assert os.WEXITSTATUS(reaped) == 0
        for child in pids:
            assert not pid_alive(child), f"child {child} survived the demo"
    finally:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            os.close(fd)
