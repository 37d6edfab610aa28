"""End to end: a LangGraph graph (``graphs/policy_graph.py``) on a real ``langgraph dev``
calls its tools through ``langgraph.agent.guarded_tool`` under the policy of a real
``irq serve --policy`` (received on the agent channel by the Agent Server's process): the
prohibited tool never runs, the approval is in the gateway's inbox with its rule and runs
once after an operator's approve, and the gateway holds the obligation opened after the PHI
read."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph_scenarios import GRAPHS_DIR, ServerClient

from backend_adapters.langgraph.dev_server import AgentServer, write_config
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
    server: ServerClient
    gateway: PolicyGateway
    tool_log: Path

    def executed(self, tid: str) -> list[tuple[str, dict[str, Any]]]:
        if not self.tool_log.exists():
            return []
        rows = [json.loads(line) for line in self.tool_log.read_text().splitlines()]
        return [(r["tool"], r["args"]) for r in rows if r["thread"] == tid]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    workdir = tmp_path / "graphs"
    workdir.mkdir()
    shutil.copy(GRAPHS_DIR / "policy_graph.py", workdir / "policy_graph.py")
    write_config(workdir, {"policy": "./policy_graph.py:graph"})
    agent_server = AgentServer(workdir)
    gateway = start_policy_gateway(
        tmp_path, agent_server.backend_url(verify_s=10), POLICY, "langgraph:local"
    )
    tool_log = tmp_path / "tools.jsonl"
    agent_server.extra_env = {
        "IRQ_AGENT_URL": gateway.agent_url,
        "IRQ_AGENT_TOKEN": gateway.agent,
        "IRQ_TEST_TOOL_LOG": str(tool_log),
    }
    api: ServerClient | None = None
    try:
        agent_server.start()
        api = ServerClient(agent_server.url)
        yield Stack(api, gateway, tool_log)
    finally:
        if api is not None:
            api.close()
        agent_server.stop()
        gateway.stop()


async def test_a_langgraph_node_guarded_by_the_gateways_policy(stack: Stack) -> None:
    tid = stack.server.start("policy", {})
    run_id = f"langgraph:local/{tid}"
    async with client(stack.gateway.url, stack.gateway.operator) as ops:
        interrupt = None
        deadline = time.monotonic() + 60
        while interrupt is None:
            assert time.monotonic() < deadline, "the approval never reached the gateway's inbox"
            snap = (await ops.query("snapshot"))["data"]
            interrupt = next(
                (i for i in snap.get("interrupts") or [] if i["run_id"] == run_id), None
            )
            if interrupt is None:
                await asyncio.sleep(0.3)
        assert interrupt["policy"]["rule"] == "refund-large"
        assert interrupt["policy"]["why"] == "refunds over 100 EUR need an operator"
        assert interrupt["action"] == "refund" and interrupt["args"] == {"amount": 250}
        assert stack.executed(tid) == []  # delete_backup prohibited, refund waiting

        answer = await ops.request({
            "type": "command", "id": uuid.uuid4().hex, "action": "decide",
            "targets": [interrupt["id"]], "decision": {"kind": "approve"},
        })
        assert answer["results"][0]["outcome"] == "applied", answer

        deadline = time.monotonic() + 60
        while stack.server.thread(tid)["status"] != "idle" or len(
            (stack.server.thread(tid).get("values") or {}).get("outcomes") or []
        ) < 3:
            assert time.monotonic() < deadline, stack.server.thread(tid)
            await asyncio.sleep(0.3)
        outcomes = stack.server.thread(tid)["values"]["outcomes"]
        assert [o["outcome"] for o in outcomes] == ["prohibited", "ran", "ran"]
        assert stack.executed(tid) == [
            ("refund", {"amount": 250}), ("read_records", {"patient": "p-7"})
        ]

        opened: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while not opened:
            assert time.monotonic() < deadline, "the obligation never reached the gateway"
            opened = list((await ops.query("obligations", run_id=run_id))["data"])
            if not opened:
                await asyncio.sleep(0.2)
        assert [(o["id"], o["state"], o["what"]) for o in opened] == [
            (f"{run_id}#read:t1/phi-read-notify", "open", "notify the CISO")
        ]
