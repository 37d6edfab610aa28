"""End to end: a restate-sdk handler (``policy_services.py``) calls its tools through
``restate.agent.guarded_tool`` under the policy of a real ``irq serve --policy`` (received on
the agent channel): the prohibited tool never runs, the approval is in the gateway's inbox
with its rule and runs once after an operator's approve, and the gateway holds the
decisions and the obligation opened after the PHI read (real restate-server, hypercorn
service and gateway processes)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from restate_scenarios import HERE, invocation, send

from backend_adapters.restate.dev_server import HypercornService, RestateServer
from tests.gateway.policy_fixtures import client
from tests.support.policy_gateway import PolicyGateway, start_policy_gateway

POLICY = """
default = "permit"

[data_classes]
phi = ["sensitive"]

[datasets.patients]
classes = ["phi"]

[[rules]]
id = "refund-large"
modality = "require_approval"
action = ["refund"]
condition = "args.amount > 100"
description = "refunds over 100 EUR need an operator"

[[rules]]
id = "no-backup-delete"
modality = "prohibit"
action = ["delete_backup"]

[[rules]]
id = "phi-read-notify"
modality = "oblige"
action = ["read_records"]
object = ["phi"]
what = "notify the CISO"
within_s = 600
"""


@dataclass
class Stack:
    server: RestateServer
    gateway: PolicyGateway
    steps: Path

    def executed(self, inv: str) -> list[tuple[str, dict[str, Any]]]:
        if not self.steps.exists():
            return []
        out = []
        for line in self.steps.read_text().splitlines():
            head, tool, args = line.split(" ", 2)
            if head == inv:
                out.append((tool, json.loads(args)))
        return out


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    server = RestateServer(base_dir=tmp_path / "server")
    server.start()
    gateway: PolicyGateway | None = None
    service: HypercornService | None = None
    try:
        gateway = start_policy_gateway(
            tmp_path, server.backend_url(poll=0.3), POLICY, "restate:local"
        )
        steps = tmp_path / "steps.log"
        service = HypercornService(
            app="policy_services:app",
            cwd=HERE,
            log=tmp_path / "service.log",
            env={
                "IRQ_RESTATE_STEPS": str(steps),
                "IRQ_AGENT_URL": gateway.agent_url,
                "IRQ_AGENT_TOKEN": gateway.agent,
            },
        )
        service.start()
        server.register(service.url)
        yield Stack(server, gateway, steps)
    finally:
        if service is not None:
            service.stop()
        if gateway is not None:
            gateway.stop()
        server.stop()


async def test_a_restate_handler_guarded_by_the_gateways_policy(stack: Stack) -> None:
    inv = send(stack.server.ingress_url, "IrqPolicy/run", {"calls": [
        {"tool": "delete_backup", "args": {"id": "b-1"}},
        {"tool": "refund", "args": {"amount": 250}},
        {"tool": "read_records", "args": {"patient": "p-7"}, "data": ["patients"]},
    ], "fulfil": [{"rule": "phi-read-notify", "note": "CISO paged"}]})
    run_id = f"restate:local/{inv}"
    async with client(stack.gateway.url, stack.gateway.operator) as ops:
        interrupt = None
        deadline = time.monotonic() + 30
        while interrupt is None:
            assert time.monotonic() < deadline, "the approval never reached the gateway's inbox"
            snap = (await ops.query("snapshot"))["data"]
            interrupt = next(
                (i for i in snap.get("interrupts") or [] if i["run_id"] == run_id), None
            )
            if interrupt is None:
                await asyncio.sleep(0.2)
        assert interrupt["policy"]["rule"] == "refund-large"
        assert interrupt["policy"]["why"] == "refunds over 100 EUR need an operator"
        assert interrupt["title"] == "refund: approval required by refund-large"
        assert stack.executed(inv) == []  # delete_backup prohibited, refund waiting

        answer = await ops.request({
            "type": "command", "id": uuid.uuid4().hex, "action": "decide",
            "targets": [interrupt["id"]], "decision": {"kind": "approve"},
        })
        assert answer["results"][0]["outcome"] == "applied", answer

        deadline = time.monotonic() + 30
        while invocation(stack.server.admin_url, inv).get("status") != "completed":
            assert time.monotonic() < deadline, invocation(stack.server.admin_url, inv)
            await asyncio.sleep(0.2)
        assert stack.executed(inv) == [
            ("refund", {"amount": 250}), ("read_records", {"patient": "p-7"})
        ]

        # opened after the call, then fulfilled by the handler with its note
        opened: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while not opened or opened[0]["state"] != "fulfilled":
            assert time.monotonic() < deadline, f"obligations of {run_id}: {opened}"
            opened = list((await ops.query("obligations", run_id=run_id))["data"])
            await asyncio.sleep(0.2)
        assert [(o["id"], o["state"], o["what"], o["note"]) for o in opened] == [
            (f"{run_id}#t3/phi-read-notify", "fulfilled", "notify the CISO", "CISO paged")
        ]
        deadline = time.monotonic() + 15
        while True:
            run = (await ops.query("run", run_id=run_id))["data"]
            decisions = sorted(run.get("policy_decisions") or [], key=lambda d: d["call_id"])
            if len(decisions) >= 3:
                break
            assert time.monotonic() < deadline, decisions
            await asyncio.sleep(0.2)
        assert [(d["call_id"], d["tool"], d["outcome"]) for d in decisions] == [
            ("t1", "delete_backup", "prohibit"),
            ("t2", "refund", "require_approval"),
            ("t3", "read_records", "permit"),
        ]
