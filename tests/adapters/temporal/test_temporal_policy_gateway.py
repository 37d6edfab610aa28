"""End to end: a Temporal worker process takes its policy from a real ``irq serve --policy``
over the agent channel; its guarded tool calls are decided by it: the prohibited tool never
runs, the approval shows in the gateway's inbox with its rule and runs once after an
operator's approve, and the gateway holds the run's decisions and the obligation the worker
opened after the call (dev server, gateway and worker are real processes)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend_adapters.temporal.dev_server import DevServer
from console.processes import stop_process
from tests.gateway.policy_fixtures import client
from tests.support.policy_gateway import start_policy_gateway, start_process

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
description = "backups are kept"

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
    url: str
    operator: str
    tool_log: Path


@pytest.fixture
def stack(temporal_server: DevServer, task_queue: str, tmp_path: Path) -> Iterator[Stack]:
    backend = temporal_server.backend_url(rps=100, query=f"TaskQueue='{task_queue}'")
    gateway = start_policy_gateway(tmp_path, backend, POLICY, "temporal:local")
    worker: subprocess.Popen[bytes] | None = None
    try:
        tool_log = tmp_path / "tools.jsonl"
        worker_log = tmp_path / "worker.log"
        worker = start_process(
            [sys.executable, "-m", "tests.support.temporal_policy_worker",
             temporal_server.address, task_queue],
            worker_log,
            {"IRQ_AGENT_URL": gateway.agent_url, "IRQ_AGENT_TOKEN": gateway.agent,
             "IRQ_TEST_TOOL_LOG": str(tool_log)},
        )
        deadline = time.monotonic() + 30
        while b"ready" not in worker_log.read_bytes():
            assert worker.poll() is None, worker_log.read_text()
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.1)
        yield Stack(gateway.url, gateway.operator, tool_log)
    finally:
        if worker is not None:
            stop_process(worker)
        gateway.stop()


def executed(stack: Stack, wid: str) -> list[tuple[str, dict[str, Any]]]:
    if not stack.tool_log.exists():
        return []
    lines = [json.loads(line) for line in stack.tool_log.read_text().splitlines()]
    return [(r["tool"], r["args"]) for r in lines if r["wf"] == wid]


async def test_a_worker_guarded_by_the_gateways_policy(
    stack: Stack, temporal_server: DevServer, task_queue: str
) -> None:
    wid = f"policy-e2e-{uuid.uuid4().hex[:6]}"
    run_id = f"temporal:local/{wid}"
    temporal_server.start_workflow(wid, "PolicyAgent", task_queue, {"calls": [
        {"tool": "delete_backup", "args": {"id": "b-1"}},
        {"tool": "refund", "args": {"amount": 250}},
        {"tool": "read_records", "args": {"patient": "p-7"}, "data": ["patients"]},
    ]})
    async with client(stack.url, stack.operator) as ops:
        async def pending() -> dict[str, Any] | None:
            snap = (await ops.query("snapshot"))["data"]
            return next((i for i in snap.get("interrupts") or [] if i["run_id"] == run_id), None)

        interrupt = None
        deadline = time.monotonic() + 30
        while interrupt is None:
            assert time.monotonic() < deadline, "the approval never reached the gateway's inbox"
            interrupt = await pending()
            if interrupt is None:
                await asyncio.sleep(0.2)
        assert interrupt["policy"]["rule"] == "refund-large"
        assert interrupt["policy"]["why"] == "refunds over 100 EUR need an operator"
        assert interrupt["title"] == "refund: approval required by refund-large"
        assert executed(stack, wid) == []  # delete_backup prohibited, refund not yet approved

        answer = await ops.request({
            "type": "command", "id": uuid.uuid4().hex, "action": "decide",
            "targets": [interrupt["id"]], "decision": {"kind": "approve"},
        })
        assert answer.get("type") != "error", answer

        close = temporal_server.result(wid)
        result = close["workflowExecutionCompletedEventAttributes"]["result"][0]
        assert [o["outcome"] for o in result["outcomes"]] == ["prohibited", "ran", "ran"]
        assert executed(stack, wid) == [
            ("refund", {"amount": 250}), ("read_records", {"patient": "p-7"})
        ]

        async def obligations() -> list[dict[str, Any]]:
            return list((await ops.query("obligations", run_id=run_id))["data"])

        opened: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while not opened:
            assert time.monotonic() < deadline, "the obligation never reached the gateway"
            opened = await obligations()
            if not opened:
                await asyncio.sleep(0.2)
        assert [(o["id"], o["rule"], o["state"], o["what"]) for o in opened] == [
            (f"{run_id}#t3/phi-read-notify", "phi-read-notify", "open", "notify the CISO")
        ]
        decisions = await until_decisions(ops, run_id, 3)
        assert [(d["call_id"], d["tool"], d["outcome"]) for d in decisions] == [
            ("t1", "delete_backup", "prohibit"),
            ("t2", "refund", "require_approval"),
            ("t3", "read_records", "permit"),
        ]


async def until_decisions(ops: Any, run_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 15
    while True:
        run = (await ops.query("run", run_id=run_id))["data"]
        decisions = list(run.get("policy_decisions") or [])
        if len(decisions) >= count:
            return sorted(decisions, key=lambda d: d["call_id"])
        assert time.monotonic() < deadline, f"decisions of {run_id}: {decisions}"
        await asyncio.sleep(0.2)
