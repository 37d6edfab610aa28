"""Hang and crash detection on Restate: irq's heartbeat view against Restate's own.

Starts a real ``restate-server`` (``make install`` puts it in ``.venv/restate``), the
restate-sdk handlers defined below under hypercorn (``--workers 0``: the SIGSTOP/SIGKILL hits
the handler's own process), and a real ``irq serve`` gateway with the Restate backend (polled
every ``--poll`` s) and a scoped agent token. Both services get inactivity + abort timeouts of
3 s + 3 s (``PATCH /services/{name}``; Restate's defaults are 1 min + 10 min).

Per trial, for each of:

- ``agentrun``: a handler inside ``backend_adapters.restate.agent.AgentRun`` (beats every
  0.5 s, timeout 3 s) whose ``ctx.run`` body blocks; the service is SIGSTOPped mid-step;
- ``plain``: the same blocking ``ctx.run`` without irq's helper, SIGSTOPped (irq has no
  heartbeat for it: it only sees Restate's view);
- ``crash``: the ``agentrun`` handler, SIGKILLed (the service is restarted afterwards);

it measures the time from the signal until irq shows ``late``, until irq shows ``lost`` (state
or suspected state in ``irq runs -o json``), until irq's row leaves ``running`` by Restate's
view (e.g. ``backing_off``), and until Restate's own ``sys_invocation.status`` leaves
``running`` (with its failure code, e.g. RT0001). One loop polls Restate's SQL and
``irq runs`` in turn, so each time carries that loop's granularity (about 0.1-0.4 s on a
loaded 2-core machine).

    .venv/bin/python benchmarks/restate_hang.py [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import restate  # noqa: E402
from restate import Context  # noqa: E402

from backend_adapters.restate.agent import AgentRun  # noqa: E402
from benchmarks.results_file import write_results  # noqa: E402

SERVICE_TIMEOUTS = {"inactivity_timeout": "3s", "abort_timeout": "3s"}

# --- the services (served by hypercorn as ``restate_hang:app`` from this directory) ---------

beats = restate.Service("HangBeats")
plain = restate.Service("HangPlain")


def _block(seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # a blocking body: the signal lands inside it
        time.sleep(0.05)
    return "done"


@beats.handler()
async def beating(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    async with AgentRun(ctx, name="hang-bench", interval_s=0.5, timeout_s=3):
        await ctx.run_typed("work", _block, restate.RunOptions(), float(req["slow_s"]))
    return {"ok": True}


@plain.handler()
async def silent(ctx: Context, req: dict[str, Any]) -> dict[str, Any]:
    await ctx.run_typed("work", _block, restate.RunOptions(), float(req["slow_s"]))
    return {"ok": True}


app = restate.app(services=[beats, plain])

# --- the benchmark --------------------------------------------------------------------------


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.1)


class Stack:
    def __init__(self, work: Path, poll: float) -> None:
        from backend_adapters.restate.dev_server import HypercornService, RestateServer
        from console.gateway.auth import create_token
        from console.model import Role
        from console.processes import free_port

        self.home = work / "home"
        self.home.mkdir(mode=0o700)
        os.environ["IRQ_HOME"] = str(self.home)
        for k in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT"):
            os.environ.pop(k, None)
        self.server = RestateServer(base_dir=work / "server")
        self.server.start()
        self.operator = create_token(Role.OPERATOR, "bench-ops", self.home)
        agent = create_token(Role.AGENT, "bench-agents", self.home, scopes=["restate:local"])
        port = free_port()
        self.gateway_url = f"ws://127.0.0.1:{port}"
        self.gateway_log = work / "serve.log"
        with open(self.gateway_log, "ab") as out:
            self.gateway = subprocess.Popen(
                [sys.executable, "-m", "console.cli.app", "serve", "--port", str(port),
                 "--backend", self.server.backend_url(poll=poll)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "IRQ_HOME": str(self.home)}, cwd=ROOT,
            )
        wait_for(self.gateway_answers, "irq serve", 60)
        self.service = HypercornService(
            app="restate_hang:app",
            cwd=Path(__file__).resolve().parent,
            log=work / "service.log",
            env={"IRQ_AGENT_URL": f"{self.gateway_url}/agent", "IRQ_AGENT_TOKEN": agent},
        )
        self.service.start()
        self.server.register(self.service.url)
        for name in ("HangBeats", "HangPlain"):
            reply = httpx.patch(
                f"{self.server.admin_url}/services/{name}", json=SERVICE_TIMEOUTS, timeout=10
            )
            reply.raise_for_status()

    def gateway_answers(self) -> bool:
        if self.gateway.poll() is not None:
            raise RuntimeError(f"irq serve exited:\n{self.gateway_log.read_text()}")
        return self.irq_runs() is not None

    def irq_runs(self) -> list[dict[str, Any]] | None:
        from typer.testing import CliRunner

        from console.cli.app import app as cli

        env = {"IRQ_URL": self.gateway_url, "IRQ_TOKEN": self.operator}
        result = CliRunner().invoke(cli, ["runs", "-o", "json"], env=env)
        if result.exit_code != 0:
            return None
        rows: list[dict[str, Any]] = json.loads(result.stdout)
        return rows

    def irq_row(self, inv: str) -> dict[str, Any] | None:
        return next((r for r in self.irq_runs() or [] if r["native_id"] == inv), None)

    def restate_status(self, inv: str) -> str | None:
        reply = httpx.post(
            f"{self.server.admin_url}/query",
            json={"query": "SELECT status, last_failure_error_code AS code FROM sys_invocation "
                           f"WHERE id = '{inv}'"},
            headers={"accept": "application/json"},
            timeout=10,
        )
        reply.raise_for_status()
        rows = reply.json()["rows"]
        if not rows:
            return None
        code = rows[0].get("code")
        return str(rows[0]["status"]) + (f" {code}" if code else "")

    def send(self, target: str, slow_s: float) -> str:
        reply = httpx.post(
            f"{self.server.ingress_url}/{target}/send", json={"slow_s": slow_s}, timeout=10
        )
        reply.raise_for_status()
        return str(reply.json()["invocationId"])

    def kill_invocation(self, inv: str) -> None:
        httpx.patch(f"{self.server.admin_url}/invocations/{inv}/kill", timeout=10)

    def stop(self) -> None:
        from console.processes import stop_process

        self.service.stop()
        stop_process(self.gateway)
        self.server.stop()


def trial(stack: Stack, kind: str, timeout_s: float) -> dict[str, Any]:
    target = "HangPlain/silent" if kind == "plain" else "HangBeats/beating"
    inv = stack.send(target, 120)
    if kind == "plain":
        wait_for(lambda: (r := stack.irq_row(inv)) and r["state"] == "running",
                 "the invocation running in irq")
    else:
        wait_for(lambda: (r := stack.irq_row(inv)) and r["heartbeat_at"]
                 and r["state"] == "running", "the handler's heartbeats in irq")
    assert (stack.restate_status(inv) or "").startswith("running")
    child = stack.service.child
    assert child is not None and child.pid is not None
    pid = child.pid
    sig = signal.SIGKILL if kind == "crash" else signal.SIGSTOP
    os.kill(pid, sig)
    t0 = time.monotonic()
    seen: dict[str, float] = {}
    what: dict[str, str] = {}
    try:
        while time.monotonic() - t0 < timeout_s:
            status = stack.restate_status(inv)
            now = time.monotonic() - t0
            if "restate" not in seen and status is not None and not status.startswith("running"):
                seen["restate"], what["restate"] = now, str(status)
            row = stack.irq_row(inv) or {}
            now = time.monotonic() - t0
            states = {row.get("state"), row.get("suspected_state")}
            if "late" not in seen and states & {"late", "lost"}:
                seen["late"] = now
            if "lost" not in seen and "lost" in states:
                seen["lost"] = now
            if "irq_backend" not in seen and row.get("state") not in (None, "running", "late",
                                                                        "lost"):
                seen["irq_backend"], what["irq_backend"] = now, str(row.get("state"))
            # a crash is backing-off (no heartbeat expected) before a beat is missed
            wanted = {"restate", "irq_backend"} | ({"late", "lost"} if kind == "agentrun" else set())
            if wanted <= seen.keys():
                break
            time.sleep(0.05)
    finally:
        if sig == signal.SIGSTOP:
            os.kill(pid, signal.SIGCONT)
        stack.kill_invocation(inv)
        if sig == signal.SIGKILL:
            stack.service.stop()
            stack.service.start()
    return {"kind": kind, **seen, "what": what}


def spread(values: list[float]) -> str:
    if not values:
        return "not seen"
    if len(values) == 1:
        return f"{values[0]:.2f} s"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--poll", type=float, default=0.3, help="irq serve's Restate poll (s)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per trial (s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="irq-restate-hang-") as tmp:
        stack = Stack(Path(tmp), args.poll)
        try:
            rows = [trial(stack, kind, args.timeout)
                    for _ in range(args.trials) for kind in ("agentrun", "plain", "crash")]
        finally:
            stack.stop()
    print(f"Restate hang/crash detection, {args.trials} trial(s); service inactivity + abort "
          f"timeouts 3 s + 3 s; AgentRun beats 0.5 s, timeout 3 s; irq polls Restate every "
          f"{args.poll:g} s. Median (range), seconds after the signal:")
    cols = [("late", "irq late"), ("lost", "irq lost"), ("irq_backend", "irq row leaves running"),
            ("restate", "Restate leaves running")]
    labels = {"agentrun": "SIGSTOP, AgentRun handler", "plain": "SIGSTOP, plain handler",
              "crash": "SIGKILL, AgentRun handler"}
    print(f"| {'scenario':<26} | " + " | ".join(f"{c[1]:<24}" for c in cols) + " |")
    print(f"|{'-' * 28}|" + "|".join("-" * 26 for _ in cols) + "|")
    for kind, label in labels.items():
        mine = [r for r in rows if r["kind"] == kind]
        cells = []
        for key, _ in cols:
            if kind == "plain" and key in ("late", "lost"):
                cells.append("n/a (no heartbeat)")
                continue
            if kind == "crash" and key in ("late", "lost") and not any(key in r for r in mine):
                cells.append("n/a (backing_off first)")
                continue
            cells.append(spread([r[key] for r in mine if key in r]))
        print(f"| {label:<26} | " + " | ".join(f"{c:<24}" for c in cells) + " |")
    states = sorted({f"{r['kind']}: Restate {r['what'].get('restate')}, irq "
                     f"{r['what'].get('irq_backend')}" for r in rows})
    print("states seen: " + "; ".join(states))
    write_results("restate_hang", {
        "trials": args.trials, "irq_poll_s": args.poll, "inactivity_timeout_s": 3,
        "abort_timeout_s": 3, "agentrun_beat_s": 0.5, "agentrun_timeout_s": 3,
        "seconds_after_signal": {
            kind: {key: {"median": round(statistics.median(v), 2), "min": round(min(v), 2),
                         "max": round(max(v), 2), "n": len(v)}
                   for key, _ in cols if (v := [r[key] for r in rows if r["kind"] == kind
                                                  and key in r])}
            for kind in labels},
        "states_seen": states, "rows": rows,
    })


if __name__ == "__main__":
    main()
