"""The Temporal policy guard (``policy_tools.guarded_tool``) on a real dev server and a real
worker (in this process, so the tool activities' own record, ``EXECUTED``, is visible): the
policy is put into the worker's policy cache as the gateway's ``policy`` frame would."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, Worker

from backend_adapters.policy_guard import shared_policy
from backend_adapters.temporal.adapter import TemporalBackend
from backend_adapters.temporal.agent import worker_options
from backend_adapters.temporal.dev_server import DevServer
from console.model import Decision, DecisionKind, Interrupt
from console.policy.model import Policy, Rule
from tests.support.temporal_policy_agents import ACTIVITIES, EXECUTED, WORKFLOWS, PolicyAgent

POLICY = Policy(
    version="sha256:0123456789abcdef",
    rules=[
        Rule(
            id="refund-large",
            modality="require_approval",
            action=["refund"],
            condition="args.amount > 100",
            description="refunds over 100 EUR need an operator",
        ),
        Rule(
            id="no-backup-delete",
            modality="prohibit",
            action=["delete_backup"],
            description="backups are kept",
        ),
        Rule(
            id="ciso-notify",
            modality="oblige",
            action=["read_records"],
            what="notify the CISO",
            within_s=600,
        ),
    ],
)
PROHIBIT_ALL = Policy(version="sha256:fedcba9876543210", default="prohibit")


def load(policy: Policy) -> None:
    shared_policy().update(
        {"type": "policy", "version": policy.version, "policy": policy.model_dump(mode="json")}
    )


@pytest.fixture
def policy() -> Iterator[Policy]:
    load(POLICY)
    yield POLICY
    load(POLICY)


@pytest.fixture
async def client(
    temporal_server: DevServer, task_queue: str, policy: Policy
) -> AsyncIterator[Client]:
    client = await Client.connect(temporal_server.address)
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        **worker_options(cadence_s=0.5),
    ):
        yield client


async def start(client: Client, task_queue: str, calls: list[dict[str, Any]]) -> str:
    wid = f"policy-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(PolicyAgent.run, {"calls": calls}, id=wid, task_queue=task_queue)
    return wid


async def outcomes(client: Client, wid: str) -> list[dict[str, Any]]:
    result: dict[str, Any] = await client.get_workflow_handle(wid).result()
    return list(result["outcomes"])


def executed(wid: str) -> list[tuple[str, dict[str, Any]]]:
    return [(tool, args) for w, tool, args in EXECUTED if w == wid]


async def wait_interrupt(adapter: TemporalBackend, wid: str, timeout: float = 15.0) -> Interrupt:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for interrupt in await adapter.list_interrupts():
            if interrupt.run_id.endswith(f"/{wid}"):
                return interrupt
        await asyncio.sleep(0.1)
    raise AssertionError(f"no interrupt of {wid} showed up")


async def test_a_prohibited_tool_never_runs_and_a_permitted_one_does(
    client: Client, task_queue: str
) -> None:
    wid = await start(
        client,
        task_queue,
        [{"tool": "delete_backup", "args": {"id": "b-1"}}, {"tool": "refund", "args": {"amount": 20}}],
    )
    done = await outcomes(client, wid)
    assert done[0] == {"tool": "delete_backup", "outcome": "prohibited", "winner": "no-backup-delete"}
    assert done[1]["outcome"] == "ran"
    assert executed(wid) == [("refund", {"amount": 20})]  # delete_backup never executed


async def test_approval_interrupt_carries_the_rule_and_the_tool_runs_once_after_approve(
    client: Client, task_queue: str, adapter: TemporalBackend
) -> None:
    decisions = {
        "approve": Decision(kind=DecisionKind.APPROVE),
        "edit": Decision(kind=DecisionKind.EDIT, args={"amount": 120}),
        "reject": Decision(kind=DecisionKind.REJECT, feedback="not this quarter"),
    }
    wids = {k: await start(client, task_queue, [{"tool": "refund", "args": {"amount": 250}}])
            for k in decisions}
    for kind, wid in wids.items():
        interrupt = await wait_interrupt(adapter, wid)
        assert interrupt.title == "refund: approval required by refund-large"
        assert interrupt.args == {"amount": 250}
        assert interrupt.policy is not None and interrupt.policy.rule == "refund-large"
        assert interrupt.policy.why == "refunds over 100 EUR need an operator"
        assert interrupt.policy.policy_version == POLICY.version
        assert executed(wid) == []  # nothing runs while the approval is pending
        await adapter.decide(interrupt, decisions[kind], idempotency_key=f"{wid}-k",
                             identity="alice")

    assert (await outcomes(client, wids["approve"]))[0]["outcome"] == "ran"
    assert executed(wids["approve"]) == [("refund", {"amount": 250})]
    assert (await outcomes(client, wids["edit"]))[0]["result"]["args"] == {"amount": 120}
    assert executed(wids["edit"]) == [("refund", {"amount": 120})]
    assert (await outcomes(client, wids["reject"]))[0] == {
        "tool": "refund", "outcome": "rejected", "rule": "refund-large",
        "feedback": "not this quarter",
    }
    assert executed(wids["reject"]) == []

    # the decision is in the history: a replay under a policy that now prohibits everything
    # takes the same path (no nondeterminism) and the tool is not executed again
    history: WorkflowHistory = await client.get_workflow_handle(wids["approve"]).fetch_history()
    load(PROHIBIT_ALL)
    replayed = await Replayer(workflows=WORKFLOWS).replay_workflow(history)
    assert replayed.replay_failure is None
    assert executed(wids["approve"]) == [("refund", {"amount": 250})]


async def test_an_obligation_is_opened_after_the_call(client: Client, task_queue: str) -> None:
    wid = await start(client, task_queue, [{"tool": "read_records", "args": {"patient": "p-7"}}])
    assert (await outcomes(client, wid))[0]["outcome"] == "ran"
    history = await client.get_workflow_handle(wid).fetch_history()
    tool_done = opened_at = None
    for index, event in enumerate(history.events):
        if event.HasField("activity_task_completed_event_attributes"):
            tool_done = index
        if event.HasField("marker_recorded_event_attributes") and any(
            f"{wid}#t1/ciso-notify".encode() in p.data
            for payloads in event.marker_recorded_event_attributes.details.values()
            for p in payloads.payloads
        ):
            opened_at = index
    assert tool_done is not None and opened_at is not None and opened_at > tool_done
    assert executed(wid) == [("read_records", {"patient": "p-7"})]


async def test_without_a_policy_a_sensitive_call_fails_closed_and_others_run(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IRQ_AGENT_URL", raising=False)  # no gateway: no policy will come
    shared_policy().reset()
    wid = await start(
        client,
        task_queue,
        [
            {"tool": "delete_backup", "args": {"id": "b-2"}, "sensitive": True},
            {"tool": "refund", "args": {"amount": 5000}},
        ],
    )
    done = await outcomes(client, wid)
    assert done[0] == {"tool": "delete_backup", "outcome": "prohibited", "winner": None}
    assert done[1]["outcome"] == "ran"  # not sensitive: permitted without a policy
    assert executed(wid) == [("refund", {"amount": 5000})]
