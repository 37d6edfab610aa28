"""The Restate lane of ``irq demo``: its extension starts a real restate-server, the demo
service and the feeder, and the adapter then sees one invocation per lane (the refund waiting
on an interrupt with its schema, the payment backing off at some point or done)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from backend_adapters.base import MemoryPauseLedger
from backend_adapters.registry import open_backend
from console.demo.launcher import DemoEnvironment
from console.demo.restate.fleet import LANES, demo_extension
from console.model import Decision, DecisionKind, InterruptKind, RunState


async def test_the_demo_lane_runs_one_invocation_per_lane(tmp_path: Path) -> None:
    env = DemoEnvironment(
        demo_dir=tmp_path, gateway_url="ws://127.0.0.1:9", agent_url="ws://127.0.0.1:9/agent",
        agent_token="",
    )
    extension = demo_extension(env)
    assert extension is not None and len(extension.backends) == 1
    children = [*extension.servers, *extension.agents]
    try:
        for child in children:
            child.start()
            deadline = time.monotonic() + 60
            while child.ready is not None and not child.ready():
                assert child.alive(), child.log_tail()
                assert time.monotonic() < deadline, f"{child.name} not ready"
                await asyncio.sleep(0.1)
        backend = open_backend(extension.backends[0], MemoryPauseLedger())
        await backend.start()
        try:
            deadline = time.monotonic() + 90
            while True:
                obs = await backend.observe()
                names = {r.name for r in obs.runs}
                refund = [i for i in obs.interrupts if i.action == "refund"]
                signoff = [i for i in obs.interrupts if i.kind is InterruptKind.AWAKEABLE]
                if {target for target, _ in LANES.values()} <= names and refund and signoff:
                    break
                assert time.monotonic() < deadline, f"lanes seen: {names}"
                await asyncio.sleep(0.5)
            assert refund[0].args_schema and "amount" in refund[0].args_schema["properties"]
            waiting = [r for r in obs.runs if r.name == "DemoRefunds/refund"]
            assert waiting[0].state is RunState.WAITING

            # the vendor sign-off waits the way Restate's examples do (an awakeable, no irq
            # code): found from Restate alone, resolved by a respond, the handler then ends
            [item] = signoff
            [vendor] = [r for r in obs.runs if r.id == item.run_id]
            assert vendor.name == "DemoVendors/onboard" and vendor.state is RunState.WAITING
            await backend.decide(
                item, Decision(kind=DecisionKind.RESPOND,
                               response={"approved": True, "by": "compliance"}),
                idempotency_key="demo-signoff-1", identity="test")
            deadline = time.monotonic() + 30
            while (run := await backend.get_run(vendor.native_id)).state is not (
                    RunState.COMPLETED):
                assert time.monotonic() < deadline, run.contract()
                await asyncio.sleep(0.3)
        finally:
            await backend.close()
    finally:
        for child in reversed(children):
            child.stop()
