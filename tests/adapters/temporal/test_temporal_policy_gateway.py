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
from console.gateway.auth import create_token
from console.model import Role
from console.processes import stop_process
from tests.adapters.temporal.workflow_history import accepted_updates
from tests.gateway.policy_fixtures import client
from tests.support.policy_gateway import PolicyGateway, start_policy_gateway, start_process

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

[[rules]]
id = "refund-audit"
modality = "oblige"
action = ["refund"]
what = "file the refund with audit"
within_s = 1

[[rules]]
id = "prod-deploy"
modality = "require_approval"
action = ["deploy"]
approvers = 2
description = "a prod deploy needs two people"

[[rules]]
id = "compliance-reads"
modality = "dispense"
action = ["read_records"]
teams = ["compliance"]
waives = ["phi-read-notify"]
"""


@dataclass
class Stack:
    gateway: PolicyGateway
    tool_log: Path

    @property
    def url(self) -> str:
        return self.gateway.url

    @property
    def operator(self) -> str:
        return self.gateway.operator


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
        yield Stack(gateway, tool_log)
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
    temporal_server.start_workflow(wid, "PolicyAgent", task_queue, {
        "calls": [
            {"tool": "delete_backup", "args": {"id": "b-1"}},
            {"tool": "refund", "args": {"amount": 250}},
            {"tool": "read_records", "args": {"patient": "p-7"}, "data": ["patients"]},
        ],
        "fulfil": [{"rule": "phi-read-notify", "note": "CISO paged"}],
    })
    # the compliance team reads PHI too: its obligation arrives waived by the dispensation
    cid = f"policy-e2e-c-{uuid.uuid4().hex[:6]}"
    temporal_server.start_workflow(cid, "PolicyAgent", task_queue, {
        "team": "compliance",
        "calls": [{"tool": "read_records", "args": {"patient": "p-8"}, "data": ["patients"]}],
    })
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
        assert answer["results"][0]["outcome"] == "applied", answer

        close = temporal_server.result(wid)
        result = close["workflowExecutionCompletedEventAttributes"]["result"][0]
        assert [o["outcome"] for o in result["outcomes"]] == ["prohibited", "ran", "ran"]
        assert executed(stack, wid) == [
            ("refund", {"amount": 250}), ("read_records", {"patient": "p-7"})
        ]
        assert result["obligations"] == [
            f"{run_id}#t2/refund-audit", f"{run_id}#t3/phi-read-notify"
        ]
        decisions = await until_decisions(ops, run_id, 3)
        assert [(d["call_id"], d["tool"], d["outcome"]) for d in decisions] == [
            ("t1", "delete_backup", "prohibit"),
            ("t2", "refund", "require_approval"),
            ("t3", "read_records", "permit"),
        ]

    # open -> fulfilled by the workflow, open -> overdue (due 1 s after the call), waived
    expected = {
        f"{run_id}#t2/refund-audit": ("overdue", ""),
        f"{run_id}#t3/phi-read-notify": ("fulfilled", "CISO paged"),
        f"temporal:local/{cid}#t1/phi-read-notify": ("waived", ""),
    }
    assert await obligation_states(stack, [run_id, f"temporal:local/{cid}"]) == expected
    waived = await obligations_of(stack, f"temporal:local/{cid}")
    assert waived[0]["by"] == "compliance-reads"

    # all three survive a SIGKILL of the gateway and its restart (the worker reconnects)
    stack.gateway.kill()
    await asyncio.to_thread(stack.gateway.restart)  # (its readiness probe runs its own loop)
    assert await obligation_states(stack, [run_id, f"temporal:local/{cid}"]) == expected


async def test_four_eyes_on_a_temporal_tool_call(
    stack: Stack, temporal_server: DevServer, task_queue: str
) -> None:
    second = create_token(Role.OPERATOR, "ops-2", stack.gateway.home)
    wid = f"policy-4e-{uuid.uuid4().hex[:6]}"
    run_id = f"temporal:local/{wid}"
    temporal_server.start_workflow(wid, "PolicyAgent", task_queue, {
        "calls": [{"tool": "deploy", "args": {"env": "prod"}}],
    })
    async with client(stack.url, stack.operator) as first, client(stack.url, second) as other:
        interrupt = None
        deadline = time.monotonic() + 30
        while interrupt is None:
            assert time.monotonic() < deadline, "the approval never reached the gateway's inbox"
            snap = (await first.query("snapshot"))["data"]
            interrupt = next(
                (i for i in snap.get("interrupts") or [] if i["run_id"] == run_id), None
            )
            if interrupt is None:
                await asyncio.sleep(0.2)
        assert (interrupt["policy"]["rule"], interrupt["policy"]["approvers"]) == ("prod-deploy", 2)

        def decide() -> dict[str, Any]:
            return {"type": "command", "id": uuid.uuid4().hex, "action": "decide",
                    "targets": [interrupt["id"]], "decision": {"kind": "approve"}}

        one = (await first.request(decide()))["results"][0]
        assert one["outcome"] == "recorded", one  # one approval is not enough
        again = (await first.request(decide()))["results"][0]
        assert again["outcome"] == "forbidden", again  # the same person twice is refused
        # the gateway delivers a decision as an update before it answers: none in the
        # workflow's history now (and a late one would be a second update, checked below)
        assert await asyncio.to_thread(accepted_updates, temporal_server, wid) == []
        assert executed(stack, wid) == []
        two = (await other.request(decide()))["results"][0]
        assert two["outcome"] == "applied", two  # the second person delivers
    close = temporal_server.result(wid)
    result = close["workflowExecutionCompletedEventAttributes"]["result"][0]
    assert [o["outcome"] for o in result["outcomes"]] == ["ran"]
    assert executed(stack, wid) == [("deploy", {"env": "prod"})]  # exactly once
    # the workflow's own record: one decision accepted, in the second person's command
    (update,) = accepted_updates(temporal_server, wid)
    assert update["meta"]["updateId"], update


async def obligations_of(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    async with client(stack.url, stack.operator) as ops:
        return list((await ops.query("obligations", run_id=run_id))["data"])


async def obligation_states(
    stack: Stack, run_ids: list[str], timeout_s: float = 20.0
) -> dict[str, tuple[str, str]]:
    """``{id: (state, note)}`` of the runs' obligations once none is ``open`` any more."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [o for r in run_ids for o in await obligations_of(stack, r)]
        states = {o["id"]: (o["state"], o["note"]) for o in found}
        if len(states) >= 3 and "open" not in {s for s, _ in states.values()}:
            return states
        assert time.monotonic() < deadline, f"obligations: {states}"
        await asyncio.sleep(0.3)


async def until_decisions(ops: Any, run_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 15
    while True:
        run = (await ops.query("run", run_id=run_id))["data"]
        decisions = list(run.get("policy_decisions") or [])
        if len(decisions) >= count:
            return sorted(decisions, key=lambda d: d["call_id"])
        assert time.monotonic() < deadline, f"decisions of {run_id}: {decisions}"
        await asyncio.sleep(0.2)
