"""Native DBOS waits (issue 22, item 3): a workflow blocked in its own ``DBOS.recv`` — written
as DBOS's examples write it, importing nothing from irq (``plain_recv_agent.py``, a worker
process on SQLite) — is an inbox item of kind ``message``, answered once through the adapter.

The evidence is DBOS's own: the workflow's output (what its recv returned), the
``operation_outputs`` row of the recv, and the ``notifications`` table (one row per message,
``consumed`` once the recv took it).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOSClient

from backend_adapters.base import Conflict, InvalidInput, MemoryPauseLedger
from backend_adapters.dbos.adapter import DBOSBackend
from backend_adapters.registry import open_backend
from console.model import Action, Decision, DecisionKind, Interrupt, InterruptKind, Run
from console.processes import ChildProcess

AGENT = Path(__file__).with_name("plain_recv_agent.py")
REPO = Path(__file__).resolve().parents[2]

PLAIN = ["n-visible", "n-respond", "n-bad", "n-wrong"]
PUBLISHED = ["n-published"]


@pytest.fixture(scope="module")
def recv_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("native-dbos")
    db = root / "sys.db"
    log = root / "agent.log"
    agent = ChildProcess(
        "plain-recv-agent",
        [sys.executable, str(AGENT), str(db), *PLAIN, "--published", *PUBLISHED],
        log,
        env={"PYTHONPATH": str(REPO)},
    )
    agent.start()
    try:
        deadline = time.monotonic() + 60
        while "ready" not in (log.read_text(errors="replace") if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        yield db
    finally:
        agent.stop()


@pytest.fixture
async def backend(recv_agent: Path) -> AsyncIterator[DBOSBackend]:
    b = open_backend(f"dbos+sqlite:///{recv_agent}?poll=0.5", MemoryPauseLedger())
    assert isinstance(b, DBOSBackend)
    await b.start()
    try:
        yield b
    finally:
        await b.close()


async def item(backend: DBOSBackend, wid: str, waiter: Any) -> tuple[Run, Interrupt]:
    async def found() -> tuple[Run, Interrupt] | None:
        obs = await backend.observe()
        run = next((r for r in obs.runs if r.native_id == wid), None)
        mine = [i for i in obs.interrupts if run and i.run_id == run.id]
        return (run, mine[0]) if run and mine else None

    found_item: tuple[Run, Interrupt] = await waiter(found, timeout_s=30)
    return found_item


def notifications(db: Path, wid: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT topic, message_uuid, consumed, consumed_by_function_id FROM notifications "
            "WHERE destination_uuid = ? ORDER BY created_at_epoch_ms",
            (wid,),
        ).fetchall()
    return [dict(r) for r in rows]


def output_of(db: Path, wid: str, timeout_s: float = 20.0) -> Any:
    client = DBOSClient(system_database_url=f"sqlite:///{db}")
    try:
        return client.retrieve_workflow(wid).get_result(polling_interval_sec=0.2)
    finally:
        client.destroy()


def recv_row(db: Path, wid: str, fid: int) -> Any:
    client = DBOSClient(system_database_url=f"sqlite:///{db}")
    try:
        steps = client.list_workflow_steps(wid)
    finally:
        client.destroy()
    return next(s for s in steps if s["function_id"] == fid)


async def test_a_plain_recv_is_an_item_of_kind_message_with_its_deadline(
    backend: DBOSBackend, waiter: Any
) -> None:
    run, intr = await item(backend, "n-visible", waiter)
    assert intr.kind is InterruptKind.MESSAGE
    assert intr.native_id == "recv:2"  # propose is function id 1, the recv 2, its sleep 3
    assert intr.allowed_decisions == [
        DecisionKind.RESPOND, DecisionKind.APPROVE, DecisionKind.REJECT
    ]
    assert intr.wait_site == (
        "DBOS.recv (function id 2) waiting (topic not recorded by DBOS until a message "
        "arrives); deadline from its timeout"
    )
    assert intr.handlers == []  # the workflow names no topic
    assert intr.deadline_at is not None
    # the deadline is the recv's timeout (3600 s) from when the wait began
    assert abs((intr.deadline_at - intr.created_at).total_seconds() - 3600) < 2
    assert run.interrupts == [intr.id]
    # parked in a recv: nothing runs that could beat, and nothing re-runs on recovery
    assert run.heartbeat_expected is False
    assert any("nothing re-runs" in n for n in run.action_notes[Action.RESUME])
    assert any("does not wake it" in n for n in run.action_notes[Action.PAUSE])
    journal = await backend.journal("n-visible")
    assert [(s.name, s.status) for s in journal] == [
        ("propose", "completed"), ("wait for message (DBOS.recv)", "in_flight")
    ]
    assert "re-runs nothing on recovery" in journal[-1].detail
    # the single-run read says the same
    single = await backend.get_run("n-visible")
    assert single.interrupts == [intr.id] and single.heartbeat_expected is False


async def test_respond_is_delivered_once_and_the_recv_returns_it(
    backend: DBOSBackend, recv_agent: Path, waiter: Any
) -> None:
    _, intr = await item(backend, "n-respond", waiter)
    answer = {"approved": True, "note": "within budget"}
    decision = Decision(kind=DecisionKind.RESPOND, response=answer, topic="approval")
    outcome = await backend.decide(intr, decision, idempotency_key="cmd-r1", identity="alice")
    assert "topic 'approval'" in outcome.detail and "irq-message:cmd-r1" in outcome.detail
    result = output_of(recv_agent, "n-respond")
    assert result["decision"] == answer and result["outcome"] == "refunded 250"
    assert recv_row(recv_agent, "n-respond", 2)["output"] == answer
    rows = notifications(recv_agent, "n-respond")
    assert rows == [{"topic": "approval", "message_uuid": "irq-message:cmd-r1::n-respond",
                     "consumed": 1, "consumed_by_function_id": 2}]
    # re-driven (a gateway crashed before recording it): reported, not sent again
    again = await backend.decide(intr, decision, idempotency_key="cmd-r1", identity="alice")
    assert "already sent" in again.detail and "taken by the recv at function id 2" in (
        again.detail)
    assert len(notifications(recv_agent, "n-respond")) == 1
    # another decision for the ended wait: refused, nothing sent
    with pytest.raises(Conflict, match="no longer waits|the run is SUCCESS"):
        await backend.decide(intr, Decision(kind=DecisionKind.APPROVE, topic="approval"),
                             idempotency_key="cmd-r2", identity="bob")
    assert len(notifications(recv_agent, "n-respond")) == 1


async def test_bad_payloads_are_refused_with_nothing_sent(
    backend: DBOSBackend, recv_agent: Path, waiter: Any
) -> None:
    _, intr = await item(backend, "n-bad", waiter)
    refused = [
        Decision(kind=DecisionKind.EDIT, args={"amount": 1}),  # a recv proposes nothing to edit
        Decision(kind=DecisionKind.RESPOND, response=None),
        Decision(kind=DecisionKind.REJECT, feedback=""),
    ]
    for n, decision in enumerate(refused):
        with pytest.raises(InvalidInput, match="decision refused"):
            await backend.decide(intr, decision, idempotency_key=f"bad-{n}", identity="alice")
    _, published = await item(backend, "n-published", waiter)
    with pytest.raises(InvalidInput, match=r"payload\.approved: 'yes' is not of type 'boolean'"):
        await backend.decide(
            published, Decision(kind=DecisionKind.RESPOND, response={"approved": "yes"}),
            idempotency_key="bad-schema", identity="alice",
        )
    assert notifications(recv_agent, "n-bad") == []
    assert notifications(recv_agent, "n-published") == []
    still = await backend.get_run("n-bad")
    assert still.native_state == "PENDING" and still.interrupts == [intr.id]


async def test_a_wrong_topic_is_explained_and_the_item_stays(
    backend: DBOSBackend, recv_agent: Path, waiter: Any
) -> None:
    _, intr = await item(backend, "n-wrong", waiter)
    first = await backend.decide(intr, Decision(kind=DecisionKind.APPROVE, topic="approvals"),
                                 idempotency_key="cmd-w1", identity="alice")
    assert "if the item stays open, the recv waits on another topic" in first.detail
    # a second message on that topic while the first waits: refused, nothing sent
    with pytest.raises(Conflict, match="has not been taken yet"):
        await backend.decide(intr, Decision(kind=DecisionKind.APPROVE, topic="approvals"),
                             idempotency_key="cmd-w2", identity="bob")

    async def explained() -> Interrupt | None:
        obs = await backend.observe()
        mine = [i for i in obs.interrupts if i.run_id == intr.run_id]
        return mine[0] if mine and mine[0].native_id != intr.native_id else None

    # the recv did not take it: the item stays, under a new id that says why
    again: Interrupt = await waiter(explained, timeout_s=30)
    assert again.native_id == "recv:2/unanswered-1" and again.kind is InterruptKind.MESSAGE
    assert "earlier message on topic 'approvals'" in again.description
    assert "waits on another topic" in again.description
    assert notifications(recv_agent, "n-wrong") == [
        {"topic": "approvals", "message_uuid": "irq-message:cmd-w1::n-wrong",
         "consumed": 0, "consumed_by_function_id": None}]
    # answered again on the right topic: delivered; the stray message stays unconsumed
    await backend.decide(again, Decision(kind=DecisionKind.APPROVE, topic="approval"),
                         idempotency_key="cmd-w3", identity="alice")
    result = output_of(recv_agent, "n-wrong")
    assert result["decision"] == {"type": "approve"}
    rows = {r["message_uuid"]: r for r in notifications(recv_agent, "n-wrong")}
    assert rows["irq-message:cmd-w3::n-wrong"]["consumed"] == 1
    assert rows["irq-message:cmd-w1::n-wrong"]["consumed"] == 0


async def test_the_published_topic_answers_without_a_topic(
    backend: DBOSBackend, recv_agent: Path, waiter: Any
) -> None:
    _, intr = await item(backend, "n-published", waiter)
    assert [(h.name, h.kind) for h in intr.handlers] == [("approval", "topic")]
    assert intr.handlers[0].args_schema is not None
    assert "on topic 'approval', as the workflow's recv_topic event says" in intr.wait_site
    # {"type": "approve"} does not fit the message schema the workflow published
    assert intr.allowed_decisions == [DecisionKind.RESPOND]
    with pytest.raises(InvalidInput, match="approve is not allowed here"):
        await backend.decide(intr, Decision(kind=DecisionKind.APPROVE),
                             idempotency_key="cmd-p0", identity="alice")
    answer = {"approved": False, "note": "over budget"}
    outcome = await backend.decide(
        intr, Decision(kind=DecisionKind.RESPOND, response=answer),
        idempotency_key="cmd-p1", identity="alice",
    )
    assert "the workflow's recv_topic event" in outcome.detail
    result = output_of(recv_agent, "n-published")
    assert result["decision"] == answer and result["outcome"] == "not refunded"
    assert [(r["topic"], r["consumed"]) for r in notifications(recv_agent, "n-published")] == [
        ("approval", 1)]


async def test_an_irq_helper_interrupt_is_not_listed_again_as_a_message(
    dbos_worker: Any, waiter: Any
) -> None:
    """irq's helper waits in DBOS.recv too (on its decision topic): only its interrupt is
    the item, never a second one of kind message, however often the poll catches its recv."""
    wid = dbos_worker.enqueue({
        "name": "helper-agent", "interval_s": 0.5, "timeout_s": 5.0, "decision_poll_s": 0.5,
        "resources": [], "script": [{"interrupt": {"title": "Ship it?", "action": "ship",
                                                   "args": {}, "allowed": ["approve"]}}],
    })
    b = open_backend(f"dbos+sqlite:///{dbos_worker.db}?poll=0.5", MemoryPauseLedger())
    assert isinstance(b, DBOSBackend)
    await b.start()
    try:
        seen: list[list[InterruptKind]] = []

        async def helper_item() -> bool:
            obs = await b.observe()
            kinds = [i.kind for i in obs.interrupts if i.run_id.endswith("/" + wid)]
            seen.append(kinds)
            return bool(kinds)

        await waiter(helper_item, timeout_s=30)
        for _ in range(12):  # ~3 s: the helper re-enters recv every 0.5 s
            await helper_item()
            time.sleep(0.25)
        since = next(n for n, kinds in enumerate(seen) if kinds)
        assert all(kinds == [InterruptKind.HELPER] for kinds in seen[since:]), seen
        run = await b.get_run(wid)
        assert len(run.interrupts) == 1 and "#recv:" not in run.interrupts[0]
    finally:
        await b.close()


async def test_a_run_recovered_into_its_recv_waits_and_is_not_retrying(
    tmp_path: Path, waiter: Any
) -> None:
    """Recovery replays up to the recv, which waits again and journals nothing: the run
    has nothing to re-run, so it is not ``retrying`` however long the person takes."""
    db = tmp_path / "sys.db"

    def agent(*ids: str) -> ChildProcess:
        log = tmp_path / f"agent-{len(list(tmp_path.glob('agent-*.log')))}.log"
        child = ChildProcess(
            "plain-recv-agent", [sys.executable, str(AGENT), str(db), *ids], log,
            env={"PYTHONPATH": str(REPO)},
        )
        child.start()
        deadline = time.monotonic() + 60
        while "ready" not in (log.read_text(errors="replace") if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        return child

    first = agent("n-recovered")
    b = open_backend(f"dbos+sqlite:///{db}?poll=0.5", MemoryPauseLedger())
    assert isinstance(b, DBOSBackend)
    await b.start()
    second = None
    try:
        run, _ = await item(b, "n-recovered", waiter)
        assert run.attempt == 1 and run.retrying is None
        first.kill()
        second = agent()  # same executor and version: DBOS recovers the workflow

        async def recovered_item() -> tuple[Run, Interrupt] | None:
            found = await item(b, "n-recovered", waiter)
            return found if found[0].attempt == 2 else None

        run, intr = await waiter(recovered_item, timeout_s=30)
        assert intr.kind is InterruptKind.MESSAGE and run.preempted is True
        assert run.retrying is None
        assert (await b.get_run("n-recovered")).retrying is None
    finally:
        await b.close()
        first.stop()
        if second is not None:
            second.stop()
