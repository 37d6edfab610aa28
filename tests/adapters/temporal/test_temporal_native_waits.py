"""Native human waits (issue 22): workflows written the way Temporal's samples write a human
approval (``native_wait_worker.py``, no irq code) show in the inbox as items of kind signal /
update and are answered through their own signal or update, exactly once — checked in
Temporal's own history. Real dev server, real worker process."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend_adapters.base import BackendError, Conflict, InvalidInput
from backend_adapters.temporal.adapter import TemporalBackend
from backend_adapters.temporal.dev_server import DevServer
from backend_adapters.temporal.native_delivery import signal_request_id
from console.model import Decision, DecisionKind, Interrupt, InterruptKind, RunState
from console.processes import ChildProcess

NATIVE_WORKER = Path(__file__).with_name("native_wait_worker.py")
REPO = Path(__file__).resolve().parents[3]
SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "approver": {"type": "string"},
        "comment": {"type": "string"},
    },
    "required": ["approved", "approver"],
    "additionalProperties": False,
}


def start_native_worker(server: DevServer, task_queue: str, log: Path) -> ChildProcess:
    child = ChildProcess(
        "native-wait-worker",
        [sys.executable, str(NATIVE_WORKER), server.address, task_queue],
        log,
        env={"PYTHONPATH": str(REPO)},
    )
    child.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "ready" in (log.read_text(errors="replace") if log.exists() else ""):
            return child
        time.sleep(0.1)
    child.stop()
    raise AssertionError("native wait worker did not start: " + log.read_text()[-2000:])


@pytest.fixture
def native_worker(
    temporal_server: DevServer, task_queue: str, tmp_path: Path
) -> Iterator[ChildProcess]:
    child = start_native_worker(temporal_server, task_queue, tmp_path / "native-worker.log")
    yield child
    child.stop()


async def wait_native(
    adapter: TemporalBackend,
    wid: str,
    accept: Callable[[Interrupt], bool] = lambda i: True,
    timeout: float = 30.0,
) -> Interrupt:
    """Observe until ``wid`` shows a native wait ``accept`` takes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obs = await adapter.observe()
        for found in obs.interrupts:
            if found.run_id.endswith(f"/{wid}") and found.kind is not InterruptKind.HELPER:
                if accept(found):
                    return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"no native wait on {wid} within {timeout:g}s")


def history(server: DevServer, wid: str) -> list[dict[str, Any]]:
    r = httpx.get(
        f"{server.http_url}/api/v1/namespaces/default/workflows/{wid}/history",
        params={"maximumPageSize": 1000},
        timeout=10,
    )
    r.raise_for_status()
    return list((r.json().get("history") or {}).get("events") or [])


def events_of(server: DevServer, wid: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in history(server, wid) if e["eventType"] == f"EVENT_TYPE_{kind}"]


def respond(payload: Any, handler: str | None = None) -> Decision:
    return Decision(kind=DecisionKind.RESPOND, response=payload, handler=handler)


async def test_a_signal_wait_is_an_inbox_item_answered_once_through_its_signal(
    adapter: TemporalBackend, native_worker: ChildProcess, temporal_server: DevServer,
    task_queue: str,
) -> None:
    wid = f"sig-{task_queue}"
    temporal_server.start_workflow(
        wid, "SignalApproval", task_queue, {"publish_schema": True, "timeout_s": 86400}
    )
    item = await wait_native(adapter, wid)

    assert item.kind is InterruptKind.SIGNAL
    assert item.native_id.startswith("wait-")
    assert [(h.name, h.kind, h.description) for h in item.handlers] == [
        ("send_approval", "signal", "Approve or reject the proposed change")
    ]
    assert item.handlers[0].args_schema == SCHEMA  # the workflow's memo irq_schemas
    assert item.allowed_decisions == [DecisionKind.RESPOND]
    began = int(item.native_id.removeprefix("wait-"))
    assert item.wait_site.startswith(f"after event #{began} WorkflowTaskCompleted; timer #")
    assert item.wait_site.endswith("(24h) pending")
    assert item.deadline_at is not None
    waited = (item.deadline_at - item.created_at).total_seconds()
    assert waited == pytest.approx(timedelta(hours=24).total_seconds(), abs=2)
    run = await adapter.get_run(wid)
    assert run.state is RunState.WAITING and item.id in run.interrupts

    # pausing a workflow that waits for a person is not a conflict: nothing runs, the wait stays
    paused = await adapter.pause(wid, reason="freeze", identity="alice")
    assert paused.operations and paused.operations[0].startswith("none: nothing runs")
    assert "send_approval" in paused.detail and "wait stays open" in paused.detail

    # a payload the published schema refuses never reaches Temporal
    with pytest.raises(InvalidInput, match="payload"):
        await adapter.decide(item, respond({"approved": "yes"}), idempotency_key="k-bad",
                             identity="alice")
    assert events_of(temporal_server, wid, "WORKFLOW_EXECUTION_SIGNALED") == []

    payload = {"approved": True, "approver": "alice", "comment": "ship it"}
    outcome = await adapter.decide(item, respond(payload), idempotency_key="k-sig-1",
                                   identity="alice")
    assert "signal send_approval delivered" in outcome.detail
    again = await adapter.decide(item, respond(payload), idempotency_key="k-sig-1",
                                 identity="alice")  # re-driven: the same key again
    assert "already delivered" in again.detail

    signaled = events_of(temporal_server, wid, "WORKFLOW_EXECUTION_SIGNALED")
    assert len(signaled) == 1
    attrs = signaled[0]["workflowExecutionSignaledEventAttributes"]
    assert attrs["signalName"] == "send_approval"
    assert attrs["input"] == [payload]
    assert attrs["requestId"] == signal_request_id("k-sig-1")
    closed = temporal_server.result(wid)
    result = closed["workflowExecutionCompletedEventAttributes"]["result"][0]
    assert result["approval"] == payload

    # another decision after the close: a conflict, and still one signal in the history
    with pytest.raises(Conflict):
        await adapter.decide(item, respond(payload), idempotency_key="k-other", identity="bob")
    assert len(events_of(temporal_server, wid, "WORKFLOW_EXECUTION_SIGNALED")) == 1


async def test_an_update_wait_is_answered_once_and_a_validator_refusal_leaves_it_open(
    adapter: TemporalBackend, native_worker: ChildProcess, temporal_server: DevServer,
    task_queue: str,
) -> None:
    wid = f"upd-{task_queue}"
    temporal_server.start_workflow(
        wid, "UpdateApproval", task_queue, {"publish_schema": True, "timeout_s": 600}
    )
    item = await wait_native(adapter, wid)

    assert item.kind is InterruptKind.UPDATE
    assert [(h.name, h.kind) for h in item.handlers] == [("approve", "update")]
    assert item.handlers[0].description == "Approve the proposed change; returns who approved it"
    assert item.wait_site.endswith("(10m) pending")
    assert item.deadline_at is not None
    waited = (item.deadline_at - item.created_at).total_seconds()
    assert waited == pytest.approx(timedelta(minutes=10).total_seconds(), abs=2)

    with pytest.raises(InvalidInput, match="payload"):  # the schema: approver is a string
        await adapter.decide(item, respond({"approved": True, "approver": 7}),
                             idempotency_key="k-bad", identity="alice")
    with pytest.raises(BackendError, match="'mallory' may not approve this change") as refused:
        await adapter.decide(item, respond({"approved": True, "approver": "mallory"}),
                             idempotency_key="k-mallory", identity="mallory")
    assert not isinstance(refused.value, InvalidInput)  # a failed outcome, not a usage error
    # refused by the workflow's validator: nothing in history, the same wait still open
    assert events_of(temporal_server, wid, "WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == []
    still = await wait_native(adapter, wid)
    assert still.id == item.id

    payload = {"approved": True, "approver": "alice"}
    outcome = await adapter.decide(item, respond(payload), idempotency_key="k-upd-1",
                                   identity="alice")
    assert "update approve completed" in outcome.detail and "approved by alice" in outcome.detail
    again = await adapter.decide(item, respond(payload), idempotency_key="k-upd-1",
                                 identity="alice")  # re-driven: the recorded outcome
    assert "approved by alice" in again.detail

    accepted = events_of(temporal_server, wid, "WORKFLOW_EXECUTION_UPDATE_ACCEPTED")
    completed = events_of(temporal_server, wid, "WORKFLOW_EXECUTION_UPDATE_COMPLETED")
    assert len(accepted) == 1 and len(completed) == 1
    request = accepted[0]["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]
    assert request["meta"]["updateId"] == "k-upd-1"
    assert request["input"]["name"] == "approve" and request["input"]["args"] == [payload]
    done = completed[0]["workflowExecutionUpdateCompletedEventAttributes"]
    assert done["outcome"]["success"] == ["approved by alice"]
    closed = temporal_server.result(wid)
    assert closed["workflowExecutionCompletedEventAttributes"]["result"][0]["approval"] == payload


async def test_metadata_is_asked_once_per_workflow_type(
    adapter: TemporalBackend, native_worker: ChildProcess, temporal_server: DevServer,
    task_queue: str,
) -> None:
    wids = [f"many-{i}-{task_queue}" for i in range(4)]
    for wid in wids:
        temporal_server.start_workflow(wid, "SignalApproval", task_queue, {})
    for wid in wids:
        await wait_native(adapter, wid)
    stats = adapter.native_waits.stats
    assert stats.metadata_queries == 1
    reads = stats.history_reads
    for _ in range(3):  # nothing moved: no further reads
        obs = await adapter.observe()
        assert len([i for i in obs.interrupts if i.kind is InterruptKind.SIGNAL]) == 4
    assert stats.history_reads == reads
    assert json.dumps([i.contract() for i in obs.interrupts])  # the JSON contract holds


def test_irq_respond_answers_native_waits_through_a_real_gateway(
    temporal_server: DevServer, native_worker: ChildProcess, task_queue: str, tmp_path: Path
) -> None:
    from console.processes import stop_process
    from tests.cli.cli_harness import irq, start_gateway

    sig, upd = f"gw-sig-{task_queue}", f"gw-upd-{task_queue}"
    temporal_server.start_workflow(sig, "SignalApproval", task_queue, {"publish_schema": True})
    temporal_server.start_workflow(upd, "UpdateApproval", task_queue, {})
    home = tmp_path / "home"
    home.mkdir()
    url = temporal_server.backend_url(query=f"TaskQueue='{task_queue}'", rps=50, poll=0.3)
    gw = start_gateway(home, backends=[url])
    env = {**gw.env(gw.operator), "IRQ_HOME": str(home)}
    try:
        def inbox() -> dict[str, dict[str, Any]]:
            out = irq("inbox", "-o", "json", env=env)
            assert out.code == 0, out.stderr
            return {i["run_id"].rsplit("/", 1)[1]: i for i in json.loads(out.stdout)}

        deadline = time.monotonic() + 60
        items = inbox()
        while not {sig, upd} <= set(items) and time.monotonic() < deadline:
            time.sleep(0.3)
            items = inbox()
        assert items[sig]["kind"] == "signal" and items[upd]["kind"] == "update"
        assert items[sig]["handlers"][0]["name"] == "send_approval"
        assert items[sig]["wait_site"] and items[sig]["deadline_at"]

        # the workflow's validator refuses: non-zero exit, the item stays open, no history
        refused = irq("respond", items[upd]["id"], "--json",
                      '{"approved": true, "approver": "mallory"}', "--yes", "-o", "json", env=env)
        assert refused.code == 1, refused.stdout + refused.stderr
        assert "may not approve this change" in refused.stdout + refused.stderr
        assert upd in inbox()
        assert events_of(temporal_server, upd, "WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == []

        for wid, payload in ((upd, '{"approved": true, "approver": "bob"}'),
                             (sig, '{"approved": false, "approver": "alice"}')):
            for _ in range(2):  # the same key twice: delivered once
                out = irq("respond", items[wid]["id"], "--json", payload, "--key", f"key-{wid}",
                          "--yes", "-o", "json", env=env)
                assert out.code == 0, out.stdout + out.stderr
        assert len(events_of(temporal_server, sig, "WORKFLOW_EXECUTION_SIGNALED")) == 1
        assert len(events_of(temporal_server, upd, "WORKFLOW_EXECUTION_UPDATE_ACCEPTED")) == 1
        assert temporal_server.result(sig)["workflowExecutionCompletedEventAttributes"][
            "result"][0]["approval"] == {"approved": False, "approver": "alice"}
    finally:
        stop_process(gw.process)
