"""Two gateways on one PostgreSQL journal: how fast a context changes hands, and how old an
agent's heartbeat is when a client of the *other* gateway sees it (part of ``make bench``).

Real components only: two ``irq serve`` processes (``--journal postgresql://…``), a private
PostgreSQL 16 server (the ``pgserver`` wheel), a real DBOS agent on SQLite pushing its
heartbeats to gateway A. Each gateway serves four DBOS contexts (one with the agent, three
whose databases do not exist: unreachable, but leased like any other), so each holds two.

- **SIGKILL takeover**: a gateway is SIGKILLed; the time until the survivor's ``stats`` shows
  it holding all four contexts (its lease round every 1 s, a lease lapsing 3 s after its last
  renewal). The killed gateway is restarted and the leases rebalance before the next kill;
  kills alternate between the two.
- **SIGTERM handover**: the same with a clean stop (the stopping gateway releases its leases).
- **Heartbeat age**: sampled every 0.1 s for a run whose agent beats every second to A, as
  seen by a client of A and by a client of B (``now - heartbeat_at`` in the client's view).

Prints a table and writes ``benchmarks/results/peers.json``.

    python benchmarks/gateway_peers.py [--kills 6] [--terms 4] [--sample-s 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.client import GatewayClient, GatewayError  # noqa: E402
from console.model import utcnow  # noqa: E402
from devtools.chaos.fleet import (  # noqa: E402
    DBOSWorkerProcess,
    GatewayProcess,
    idle_plan,
    make_tokens,
)
from devtools.chaos.storm import postgres_journal  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "peers.json"
CONTEXTS = ["dbos:local", "dbos:x1", "dbos:x2", "dbos:x3"]


async def _held(gw: GatewayProcess, token: str) -> set[str] | None:
    """The contexts ``gw`` holds (its stats), or None when it does not answer."""
    try:
        async with GatewayClient(gw.url, token) as client:
            stats = await asyncio.wait_for(client.query("stats"), 2)
    except (GatewayError, OSError, TimeoutError):
        return None
    return set(stats["peers"]["held"])


async def _until(gw: GatewayProcess, token: str, want: Any, timeout_s: float = 30.0) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        held = await _held(gw, token)
        if held is not None and want(held):
            return time.monotonic() - began
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{gw.name}: not within {timeout_s} s")


def _balanced(held: set[str]) -> bool:
    return len(held) == len(CONTEXTS) // 2


async def _handover(gws: list[GatewayProcess], tokens: dict[str, str], victim: int,
                    sig: int) -> float:
    """Seconds from the signal to the survivor holding every context."""
    dead, alive = gws[victim], gws[1 - victim]
    await _until(alive, tokens[alive.name], _balanced)
    await _until(dead, tokens[dead.name], _balanced)
    assert dead.child is not None and dead.child.popen is not None
    await asyncio.sleep(random.uniform(0.0, 1.0))  # anywhere in the victim's lease round
    began = time.monotonic()
    os.kill(dead.pid, sig)
    await _until(alive, tokens[alive.name], lambda h: h == set(CONTEXTS))
    took = time.monotonic() - began
    dead.child.popen.wait(30)
    dead.start()
    return took


async def _beat_ages(gw: GatewayProcess, token: str, run_id: str, seconds: float
                     ) -> list[float]:
    ages: list[float] = []
    async with GatewayClient(gw.url, token) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            run = client.view.runs.get(run_id)
            if run is not None and run.heartbeat_at is not None:
                ages.append((utcnow() - run.heartbeat_at).total_seconds())
            await asyncio.sleep(0.1)
    return ages


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    with postgres_journal() as journal:
        worker = DBOSWorkerProcess(work / "dbos")
        backends = [worker.backend_url] + [
            f"dbos+sqlite:///{work / name / 'sys.db'}?context={name}&poll=0.3"
            for name in ("x1", "x2", "x3")]
        gws = [GatewayProcess(work / name, backends, name=name, journal=journal)
               for name in ("gw-a", "gw-b")]
        tokens: dict[str, str] = {}
        for gw in gws:
            made = make_tokens(gw.home, agents=1, scopes=["dbos:*"])
            tokens[gw.name] = made["admin"][0]
            if gw.name == "gw-a":
                worker.agent_url, worker.agent_token = gw.agent_url, made["agent"][0]
        try:
            for gw in gws:
                gw.start()
            worker.start()
            worker.enqueue([("peers-beating", {**idle_plan(600), "interval_s": 1.0})])
            run_id = "dbos:local/peers-beating"
            await _until(gws[0], tokens["gw-a"], _balanced)
            await asyncio.sleep(2.0)  # the run is observed and beating
            ages_a, ages_b = await asyncio.gather(
                _beat_ages(gws[0], tokens["gw-a"], run_id, args.sample_s),
                _beat_ages(gws[1], tokens["gw-b"], run_id, args.sample_s))
            worker.stop()  # its agent pushes to A, which is about to be killed
            kills = [await _handover(gws, tokens, n % 2, signal.SIGKILL)
                     for n in range(args.kills)]
            terms = [await _handover(gws, tokens, n % 2, signal.SIGTERM)
                     for n in range(args.terms)]
        finally:
            worker.stop()
            for gw in gws:
                gw.stop()
    if not ages_a or not ages_b:
        raise RuntimeError("no heartbeats seen: " + worker.output.read_text()[-2000:])
    return {
        "contexts": len(CONTEXTS), "gateways": 2, "lease_ttl_s": 3.0, "lease_renew_s": 1.0,
        "sigkill_takeover_s": {"n": len(kills), "median": round(statistics.median(kills), 2),
                               "worst": round(max(kills), 2), "all": [round(k, 2) for k in kills]},
        "sigterm_handover_s": {"n": len(terms), "median": round(statistics.median(terms), 2),
                               "worst": round(max(terms), 2), "all": [round(t, 2) for t in terms]},
        "heartbeat_age_s": {
            "agent_interval_s": 1.0,
            "at_gateway_a": {"p50": round(_pct(ages_a, 0.5), 2), "p95": round(_pct(ages_a, 0.95), 2),
                             "max": round(max(ages_a), 2), "samples": len(ages_a)},
            "at_gateway_b": {"p50": round(_pct(ages_b, 0.5), 2), "p95": round(_pct(ages_b, 0.95), 2),
                             "max": round(max(ages_b), 2), "samples": len(ages_b)},
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--terms", type=int, default=4)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="irq-peers-") as tmp:
        result = asyncio.run(bench(args, Path(tmp)))
    result.update(started_at=utcnow().isoformat(timespec="seconds"), host=platform.node(),
                  cpus=os.cpu_count(), load_avg_at_end=[round(x, 2) for x in os.getloadavg()],
                  total_seconds=round(time.monotonic() - began, 1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    k, t, h = result["sigkill_takeover_s"], result["sigterm_handover_s"], result["heartbeat_age_s"]
    rows = [
        ("SIGKILL: survivor holds every context", f"median {k['median']} s, worst {k['worst']} s "
         f"({k['n']} kills)"),
        ("SIGTERM: survivor holds every context", f"median {t['median']} s, worst {t['worst']} s "
         f"({t['n']} stops)"),
        ("heartbeat age at A (agent pushes to A)", f"p50 {h['at_gateway_a']['p50']} s, p95 "
         f"{h['at_gateway_a']['p95']} s"),
        ("heartbeat age at B (through peer events)", f"p50 {h['at_gateway_b']['p50']} s, p95 "
         f"{h['at_gateway_b']['p95']} s"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"two gateways, {result['contexts']} contexts, lease ttl 3 s, renewed every 1 s")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
