"""The real components the chaos scenarios break: ``irq serve`` gateway processes, DBOS agent
workers on SQLite, a Temporal dev server with a worker of sample agents.

Each starts on free loopback ports in a directory of the caller's choosing, is waited for until
it answers, and is stopped (or SIGKILLed, SIGSTOPped) by its own pid. Used by the ``tests/chaos``
tests and by ``benchmarks/chaos.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.gateway.auth import create_token
from console.model import Role
from console.processes import ChildProcess, free_port
from devtools import postgres_server as pg

ROOT = Path(__file__).resolve().parents[2]


def rss_kb(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tcp_answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class GatewayProcess:
    """One ``irq serve`` process on a fixed port, restartable in place (same port, home and
    journal, so a restart finds what the killed one wrote)."""

    home: Path
    backends: list[str]
    name: str = "gw"
    journal: str = ""  # postgresql://… (shared) or "" (SQLite in home)
    port: int = field(default_factory=free_port)
    child: ChildProcess | None = None
    starts: int = 0
    kills: int = 0
    start_failures: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def agent_url(self) -> str:
        return f"{self.url}/agent"

    @property
    def pid(self) -> int:
        assert self.child is not None and self.child.pid is not None
        return self.child.pid

    @property
    def log(self) -> Path:
        return self.home / f"{self.name}.log"

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
                "--log-level", "warning"]
        for backend in self.backends:
            argv += ["--backend", backend]
        if self.journal:
            argv += ["--journal", self.journal, "--gateway-id", self.name]
        return argv

    def start(self, timeout_s: float = 60.0, attempts: int = 3) -> float:
        """Start it and wait until it accepts connections; returns the seconds that took.

        A gateway that exits while starting is started again, as a supervisor would (up to
        ``attempts`` times); each such exit is kept in :attr:`start_failures` with the last
        line of its log (not the "hint:" line after it)."""
        began = time.monotonic()
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(timeout_s)
                return time.monotonic() - began
            except RuntimeError as exc:
                lines = [ln for ln in str(exc).strip().splitlines()
                         if ln.strip() and not ln.strip().startswith("hint:")]
                self.start_failures.append((lines or ["?"])[-1][:300])
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float) -> float:
        began = time.monotonic()
        self.child = ChildProcess(self.name, self.argv(), self.log, cwd=ROOT,
                                  env={"IRQ_HOME": str(self.home)})
        self.child.start()
        self.starts += 1
        deadline = began + timeout_s
        while time.monotonic() < deadline:
            if tcp_answers(self.port):
                return time.monotonic() - began
            if not self.child.alive():
                break
            time.sleep(0.05)
        tail = self.child.log_tail(40)
        self.stop()
        raise RuntimeError(f"gateway {self.name} did not start:\n{tail}")

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    def kill(self) -> int | None:
        """SIGKILL by pid; returns the exit status the kernel reported (-9)."""
        if self.child is None or self.child.popen is None:
            return None
        self.child.kill()
        self.kills += 1
        return self.child.popen.returncode

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def rss_kb(self) -> int:
        return rss_kb(self.pid) if self.alive() else 0

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


def make_tokens(home: Path, *, clients: int = 1, agents: int = 1,
                scopes: list[str] | None = None) -> dict[str, list[str]]:
    """Operator tokens (``operator``), an admin and agent tokens (``agent``), written into
    ``home`` before the gateway starts (a running gateway also accepts them at once)."""
    home.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:6]
    return {
        "operator": [create_token(Role.OPERATOR, f"chaos-op-{tag}-{i}", home)
                     for i in range(clients)],
        "admin": [create_token(Role.ADMIN, f"chaos-admin-{tag}", home)],
        "agent": [create_token(Role.AGENT, f"chaos-agent-{tag}-{i}", home,
                               scopes=scopes or ["dbos:*", "temporal:*"])
                  for i in range(agents)],
    }


# -------------------------------------------------------------------------- PostgreSQL


@dataclass
class JournalPostgres:
    """A private PostgreSQL server for the gateways' shared journal, from the ``pgserver``
    wheel's binaries (as devtools/postgres_server.py finds and runs them), in a temp dir
    of its own, on one port for its whole life: :meth:`restart` brings it back where the
    gateways' ``--journal`` URL points."""

    port: int = field(default_factory=free_port)
    base: Path | None = None
    process: Any = None
    restarts: int = 0
    _bin: Path | None = None
    _run_as: Any = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/irq_journal"

    def start(self) -> None:
        import subprocess
        import tempfile

        self._run_as = pg.server_user()
        # the system's temp dir, not the caller's: pytest's tmp dirs are private to root
        # (0700) and, as root, the server runs as nobody (as in the postgres_server fixture)
        self.base = Path(tempfile.mkdtemp(prefix="irq-chaos-pg-"))
        if self._run_as.user is not None:
            os.chown(self.base, self._run_as.user, self._run_as.group or -1)
        self._bin = pg.bin_dir(pg.packaged_install(), self.base, self._run_as)
        subprocess.run(
            [str(self._bin / "initdb"), "-D", str(self.base / "data"), "-U", pg.PG_USER,
             "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            cwd=self.base, env=pg.server_env(), stdin=subprocess.DEVNULL, capture_output=True,
            timeout=120, check=True, **self._run_as.popen_kwargs())  # fmt: skip
        self._postmaster()
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=pg.PG_USER,
                             dbname="postgres", autocommit=True) as conn:
            conn.execute('CREATE DATABASE "irq_journal"')

    def _postmaster(self, timeout_s: float = 30.0) -> None:
        import subprocess

        import psycopg

        assert self.base is not None and self._bin is not None
        options = [f"-c{k}={v}" for k, v in pg.FAST.items()]
        with (self.base / "postgres.log").open("ab") as out:
            self.process = subprocess.Popen(
                [str(self._bin / "postgres"), "-D", str(self.base / "data"), "-p",
                 str(self.port), "-k", str(self.base), *options],
                cwd=self.base, env=pg.server_env(), stdin=subprocess.DEVNULL, stdout=out,
                stderr=out,
                **self._run_as.popen_kwargs())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                psycopg.connect(host="127.0.0.1", port=self.port, user=pg.PG_USER,
                                dbname="postgres", connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.05)
        raise RuntimeError("PostgreSQL did not start: "
                           + (self.base / "postgres.log").read_text(errors="replace")[-2000:])

    def shutdown(self) -> None:
        """Fast shutdown of the postmaster by its pid (connections are cut)."""
        if self.process is not None:
            pg.stop_postmaster(self.process)

    def restart(self) -> None:
        self.shutdown()
        self._postmaster()
        self.restarts += 1

    def stop(self) -> None:
        import shutil

        self.shutdown()
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)


# ------------------------------------------------------------------------------ DBOS


@dataclass
class DBOSWorkerProcess:
    """One ``console.demo.dbos.worker`` (real DBOS agents on SQLite) serving its own queue."""

    root: Path
    executor_id: str = "chaos-w1"
    agent_url: str = ""  # the gateway's /agent: the agents push heartbeats there
    agent_token: str = ""
    child: ChildProcess | None = None

    @property
    def db(self) -> Path:
        return self.root / "sys.db"

    @property
    def queue(self) -> str:
        return f"q-{self.executor_id}"

    @property
    def exec_log(self) -> Path:
        return self.root / "exec.jsonl"

    @property
    def output(self) -> Path:
        return self.root / f"{self.executor_id}.out"

    @property
    def backend_url(self) -> str:
        return f"dbos+sqlite:///{self.db}?context=local&poll=0.3"

    def start(self, timeout_s: float = 60.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "console.demo.dbos.worker", "--db", str(self.db),
                "--executor-id", self.executor_id, "--queue", self.queue, "--queue-poll", "0.2",
                "--board", str(self.root / "board"), "--log", str(self.exec_log),
                "--watch-parent"]
        env = {"IRQ_AGENT_CONTEXT": "local"}
        if self.agent_url:
            env.update(IRQ_AGENT_URL=self.agent_url, IRQ_AGENT_TOKEN=self.agent_token)
        offset = self.output.stat().st_size if self.output.exists() else 0
        self.child = ChildProcess(self.executor_id, argv, self.output, cwd=ROOT, env=env)
        self.child.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.child.alive():
            if b"ready (pid" in self.output.read_bytes()[offset:]:
                return
            time.sleep(0.1)
        tail = self.child.log_tail(40)
        self.stop()
        raise RuntimeError(f"DBOS worker did not start:\n{tail}")

    def enqueue(self, plans: list[tuple[str, dict[str, Any]]]) -> None:
        """Enqueue ``(workflow_id, plan)`` pairs for the demo agent workflow."""
        from dbos import DBOSClient

        from console.demo.dbos.agents import APP_VERSION, WORKFLOW_NAME

        client = DBOSClient(system_database_url=f"sqlite:///{self.db}")
        try:
            for wid, plan in plans:
                client.enqueue({"queue_name": self.queue, "workflow_name": WORKFLOW_NAME,
                                "workflow_id": wid, "app_version": APP_VERSION},
                               {"board": str(self.root / "board"), "log": str(self.exec_log),
                                **plan})
        finally:
            client.destroy()

    def freeze(self) -> None:
        assert self.child is not None and self.child.pid is not None
        os.kill(self.child.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.child is not None and self.child.pid is not None
        os.kill(self.child.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


def approval_plan(interrupts: int, *, step_s: float = 0.05) -> dict[str, Any]:
    """A DBOS demo-agent plan raising ``interrupts`` approvals one after another (each followed
    by a short journaled step when approved)."""
    script: list[dict[str, Any]] = []
    for n in range(interrupts):
        script.append({"interrupt": {"title": f"chaos approval {n + 1}", "action": "deploy",
                                     "args": {"n": n + 1}, "allowed": ["approve", "reject"]},
                       "then": [{"step": f"after-{n + 1}", "seconds": step_s}]})
    return {"name": "chaos-agent", "interval_s": 1.0, "timeout_s": 30.0,
            "decision_poll_s": 0.3, "resources": [], "script": script}


def idle_plan(seconds: float) -> dict[str, Any]:
    """A DBOS demo-agent plan that works in short steps for about ``seconds`` (pause/resume
    targets)."""
    steps = max(1, int(seconds / 0.5))
    return {"name": "chaos-idle", "interval_s": 1.0, "timeout_s": 30.0,
            "decision_poll_s": 0.5, "resources": [],
            "script": [{"step": f"work-{n}", "seconds": 0.5} for n in range(steps)]}
