"""Native waits on Restate (issue 22): wait begins -> inbox item visible, at 1 and at many
waiting invocations, and the requests the adapter puts on the server.

Starts a real ``restate-server`` and the plain restate-sdk services of
``tests/adapters/restate/native_services.py`` (written like Restate's examples, no irq code),
opens the adapter as the registry does and polls ``observe()`` every ``--poll`` seconds
throughout. Then:

1. **1 waiting**, one probe at a time, each answered through ``adapter.decide`` before the
   next: ``--probes`` awakeables handed out by a ``ctx.run`` (``NativeReview/review``: seen
   from the journaled result), ``--probes`` workflow promises (``NativeOrder``), and
   ``--silent`` awakeables whose id is in no journaled result (``NativeSilent/review``, its
   service's inactivity timeout set to ``--inactivity`` s: seen only once Restate suspends
   the invocation). Latency = observation time - the item's ``created_at`` (when the wait
   began: the journal entry's ``appended_at``, the server's clock on the same machine).
2. **many waiting**: ``--fleet`` ``NativeReview`` invocations sent at once (left waiting),
   the time until all are visible, then the probes of phase 1 again with the fleet waiting.
3. After each phase, ``--window`` s with nothing changing: the requests/s the adapter sends
   (counted on its HTTP client, by path) and how long one ``observe()`` takes.

Writes ``benchmarks/results/native_waits_restate.json``. Runs in under 2 minutes with the
defaults. Usage: ``python benchmarks/native_waits_restate.py [--fleet 1000] [--poll 0.5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend_adapters.base import MemoryPauseLedger  # noqa: E402
from backend_adapters.registry import open_backend  # noqa: E402
from backend_adapters.restate.adapter import RestateBackend  # noqa: E402
from backend_adapters.restate.dev_server import HypercornService, RestateServer  # noqa: E402
from benchmarks.latency_stats import dist  # noqa: E402
from console.model import Decision, DecisionKind, Interrupt, InterruptKind  # noqa: E402

SERVICES = ROOT / "tests" / "adapters" / "restate"
RESULTS = ROOT / "benchmarks" / "results" / "native_waits_restate.json"


class Watcher:
    """Polls observe() every ``poll_s``; remembers when each native item was first seen."""

    def __init__(self, adapter: RestateBackend, poll_s: float) -> None:
        self.adapter = adapter
        self.poll_s = poll_s
        self.first_seen: dict[str, tuple[datetime, Interrupt]] = {}
        self.observe_s: list[float] = []
        self.requests: Counter[str] = Counter()

    async def count(self, request: httpx.Request) -> None:
        self.requests[request.url.path] += 1

    async def run(self) -> None:
        while True:
            began = time.monotonic()
            obs = await self.adapter.observe()
            self.observe_s.append(time.monotonic() - began)
            now = datetime.now(UTC)
            for item in obs.interrupts:
                if item.kind is not InterruptKind.HELPER and item.run_id not in self.first_seen:
                    self.first_seen[item.run_id] = (now, item)
            await asyncio.sleep(max(0.0, self.poll_s - (time.monotonic() - began)))

    async def seen(self, inv: str, timeout_s: float = 30.0) -> tuple[float, Interrupt]:
        run_id = self.adapter.run_id(inv)
        deadline = time.monotonic() + timeout_s
        while run_id not in self.first_seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{inv} never showed")
            await asyncio.sleep(0.02)
        at, item = self.first_seen[run_id]
        return (at - item.created_at).total_seconds(), item


async def send(client: httpx.AsyncClient, target: str, body: dict[str, Any]) -> str:
    reply = await client.post(f"/{target}/send", json=body)
    reply.raise_for_status()
    return str(reply.json()["invocationId"])


async def probes(
    watcher: Watcher, client: httpx.AsyncClient, n: int, silent: int, tag: str
) -> dict[str, Any]:
    """One wait at a time, each answered before the next."""
    out: dict[str, list[float]] = {"awakeable": [], "promise": [], "suspended_awakeable": [],
                                   "decide": []}
    plan = [("awakeable", "NativeReview/review")] * n + [("promise", "")] * n + [
        ("suspended_awakeable", "NativeSilent/review")] * silent
    for i, (kind, target) in enumerate(plan):
        target = target or f"NativeOrder/{tag}-{i}/run"
        inv = await send(client, target, {})
        latency, item = await watcher.seen(inv, timeout_s=60)
        out[kind].append(latency)
        began = time.monotonic()
        decision = Decision(kind=DecisionKind.RESPOND, response={"ok": i},
                            handler="approve" if kind == "promise" else None)
        await watcher.adapter.decide(item, decision, idempotency_key=f"{tag}-{i}",
                                     identity="bench")
        out["decide"].append(time.monotonic() - began)
    return {kind: dist(values) for kind, values in out.items()}


async def steady(watcher: Watcher, window_s: float) -> dict[str, Any]:
    before, n_obs = Counter(watcher.requests), len(watcher.observe_s)
    await asyncio.sleep(window_s)
    sent = watcher.requests - before
    return {
        "seconds": window_s,
        "requests_per_s": round(sum(sent.values()) / window_s, 2),
        "by_path_per_s": {k: round(v / window_s, 2) for k, v in sorted(sent.items())},
        "observe_s": dist(watcher.observe_s[n_obs:]),
    }


async def bench(args: argparse.Namespace, server: RestateServer) -> dict[str, Any]:
    httpx.patch(f"{server.admin_url}/services/NativeSilent",
                json={"inactivity_timeout": f"{args.inactivity:g}s"}, timeout=10).raise_for_status()
    adapter = open_backend(server.backend_url(), MemoryPauseLedger())
    assert isinstance(adapter, RestateBackend)
    await adapter.start()
    watcher = Watcher(adapter, args.poll)
    # count what the adapter sends (its own HTTP client; a benchmark may look inside)
    adapter._http._client.event_hooks["request"].append(watcher.count)  # noqa: SLF001
    task = asyncio.create_task(watcher.run())
    result: dict[str, Any] = {"poll_s": args.poll, "inactivity_timeout_s": args.inactivity}
    try:
        async with httpx.AsyncClient(base_url=server.ingress_url, timeout=30) as client:
            result["one_waiting"] = await probes(watcher, client, args.probes, args.silent, "p1")
            await send(client, "NativeReview/review", {})  # one left waiting in the window
            result["one_waiting"]["steady"] = await steady(watcher, args.window)
            started = time.monotonic()
            fleet = await asyncio.gather(*(
                send(client, "NativeReview/review", {}) for _ in range(args.fleet)))
            sent_s = time.monotonic() - started
            for inv in fleet:
                await watcher.seen(inv, timeout_s=120)
            lat = [
                (watcher.first_seen[adapter.run_id(inv)][0]
                 - watcher.first_seen[adapter.run_id(inv)][1].created_at).total_seconds()
                for inv in fleet
            ]
            result["fleet_waiting"] = {
                "waiting": args.fleet,
                "send_s": round(sent_s, 2),
                "all_visible_after_s": round(time.monotonic() - started, 2),
                "fleet_wait_to_visible": dist(lat),
                **await probes(watcher, client, args.probes, args.silent, "p2"),
                "steady": await steady(watcher, args.window),
            }
    finally:
        task.cancel()
        await adapter.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--silent", type=int, default=3)
    parser.add_argument("--inactivity", type=float, default=1.0)
    parser.add_argument("--poll", type=float, default=0.5)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        server = RestateServer(base_dir=base / "server")
        service = HypercornService(app="native_services:app", cwd=SERVICES, log=base / "svc.log",
                                   env={"IRQ_RESTATE_STEPS": str(base / "steps.log"),
                                        "PYTHONPATH": str(ROOT)})
        server.start()
        try:
            service.start()
            server.register(service.url)
            result = asyncio.run(bench(args, server))
        finally:
            service.stop()
            server.stop()
    result["run_s"] = round(time.monotonic() - started, 1)
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
