"""``irq drill`` against a real gateway and real DBOS agent processes, each kept running by a
supervisor the test started (``tests/support/restart_supervisor.py``); the context's
``preempt_command`` SIGKILLs the worker pid that supervisor wrote, and the supervisor restarts
it after a delay longer than the heartbeat timeout (so ``late`` and ``lost`` are seen).

- the honest agent recovers: only the in-flight step re-ran, the lock and GPU are held again,
  the report says clean and the exit code is 0;
- the broken agent charges again after the restart (its own record shows two charges): the
  report names ``charge`` as a completed step that ran again and the exit code is 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from bulk_fleet import eventually
from cli_harness import ROOT, ServedGateway, irq, start_gateway

from console.processes import free_port, stop_process

pytestmark = [pytest.mark.slow]

AGENT = Path(__file__).with_name("dbos_drill_agent.py")
SUPERVISOR = ROOT / "tests" / "support" / "restart_supervisor.py"
RESTART_DELAY_S = 4.5  # > the agent's heartbeat timeout (4 s): the run goes lost first


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def drill_fleet(irq_home: Path) -> Iterator[ServedGateway]:
    from console.demo.launcher import dbos_backend_url
    from console.gateway.auth import create_token
    from console.model import Role

    port = free_port()
    agent_token = create_token(Role.AGENT, "drill-agent", irq_home)
    with ExitStack() as stack:
        for name, extra in (("honest", []), ("broken", ["--recharge"])):
            log = stack.enter_context(open(irq_home / f"agent-{name}.log", "ab"))  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, str(SUPERVISOR), "run", "--pidfile",
                 str(irq_home / f"worker-{name}.pid"), "--delay", str(RESTART_DELAY_S), "--",
                 sys.executable, str(AGENT), "--db", str(irq_home / f"{name}.db"),
                 "--record", str(irq_home / f"record-{name}.jsonl"), "--context", name,
                 *extra],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                env={**os.environ, "IRQ_AGENT_URL": f"ws://127.0.0.1:{port}/agent",
                     "IRQ_AGENT_TOKEN": agent_token, "PYTHONPATH": str(ROOT)},
            )
            stack.callback(stop_process, proc)
            eventually(lambda name=name: (irq_home / f"{name}.db").exists(),  # type: ignore[misc]
                       f"the {name} agent's database", 30)
        backends = [dbos_backend_url(irq_home / f"{name}.db") + f"?context={name}&poll=0.3"
                    for name in ("honest", "broken")]
        gateway = start_gateway(irq_home, backends, port=port)
        stack.callback(stop_process, gateway.process)
        kill = f"{sys.executable} {SUPERVISOR} kill {irq_home}/worker-{{context}}.pid"
        (irq_home / "config.toml").write_text(
            'current_context = "drill"\n[contexts.drill]\n'
            f'url = "{gateway.url}"\ntoken = "{gateway.operator}"\n'
            f"preempt_command = '{kill}'\n"
        )
        yield gateway


def _beating_with_work(gateway: ServedGateway, context: str) -> bool:
    import asyncio

    from console.client import GatewayClient

    async def fetch() -> bool:
        async with GatewayClient(gateway.url, gateway.operator, subscribe=False) as client:
            runs = [r for r in client.view.runs.values() if r.context == context]
            if not runs or runs[0].heartbeat_at is None or not runs[0].resources:
                return False
            data = await client.query("run", run_id=runs[0].id)
            return any(s["name"] == "work-2" for s in data.get("journal") or [])

    return asyncio.run(fetch())


def test_drill_reports_clean_recovery_and_a_completed_step_that_ran_twice(
    drill_fleet: ServedGateway, irq_home: Path
) -> None:
    for context in ("honest", "broken"):
        eventually(lambda c=context: _beating_with_work(drill_fleet, c),  # type: ignore[misc]
                   f"the {context} run beating and working", 40)

    refused = irq("drill", "--filter", "ctx:honest")  # no terminal, no --yes: nobody to ask
    assert refused.code == 2, refused.stdout + refused.stderr

    clean = irq("drill", "--filter", "ctx:honest", "--yes", "-o", "json", "--timeout", "30")
    assert clean.code == 0, clean.stdout + clean.stderr
    (result,) = json.loads(clean.stdout)["results"]
    assert result["run_id"] == "dbos:honest/wf-drill-1" and result["backend"] == "dbos"
    assert result["clean"] and result["resources_ok"] and result["completed_steps_rerun"] == []
    assert 0 < result["late_after_s"] <= result["lost_after_s"] < result["recovered_after_s"]
    assert all(s.startswith("work-") for s in result["rerun_steps"])
    honest = _records(irq_home / "record-honest.jsonl")
    assert [r["event"] for r in honest].count("start") == 2  # the supervisor restarted it once
    assert [r["event"] for r in honest].count("charge") == 1

    broken = irq("drill", "--filter", "ctx:broken", "--yes", "--timeout", "30")
    assert broken.code == 1, broken.stdout + broken.stderr
    print(clean.stdout, broken.stdout, broken.stderr)  # the measured numbers, with -s
    row = " ".join(broken.stdout.split())
    assert "dbos:broken/wf-drill-1" in row and " NO " in row and "charge" in row
    assert "0 of 1 run(s) recovered cleanly" in broken.stderr
    charges = [r for r in _records(irq_home / "record-broken.jsonl") if r["event"] == "charge"]
    assert len(charges) == 2 and charges[0]["pid"] != charges[1]["pid"]
