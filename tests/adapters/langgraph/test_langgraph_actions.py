"""Pause, resume and cancel on a real Agent Server, and the server going away: the thread's
own state (through the server's API) shows what happened; irq's states never show a
cancelled run as waiting."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_scenarios import ServerClient, eventually, start_agent_server

from backend_adapters.base import Conflict, MemoryPauseLedger, Unreachable, Unsupported
from backend_adapters.langgraph.adapter import LangGraphBackend
from backend_adapters.registry import open_backend
from console.model import Action, RunState

SLOW_S = 6.0


def started_slow_node(server: ServerClient, seconds: float = SLOW_S) -> str:
    """A thread whose run finished ``prepare`` and is inside the slow async node."""
    tid = server.start("slow", {"seconds": seconds})

    def in_slow() -> bool:
        state = server.state(tid)
        return state["next"] == ["slow"] and server.thread(tid)["status"] == "busy"

    eventually(in_slow, "the run to be inside the slow node")
    return tid


async def test_pause_keeps_the_checkpoint_and_resume_continues_from_it(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = started_slow_node(server)
    running = await adapter.get_run(tid)
    assert running.state is RunState.RUNNING and running.heartbeat_expected
    assert any("synchronous node keeps running" in n for n in running.action_notes[Action.PAUSE])

    outcome = await adapter.pause(tid, reason="maintenance", identity="ann")

    assert any("cancel?action=interrupt" in op for op in outcome.operations)
    thread = server.thread(tid)
    assert thread["status"] == "interrupted" and not thread["interrupts"]
    assert server.state(tid)["next"] == ["slow"]  # the checkpoint before the slow node stays
    paused = await adapter.get_run(tid)
    assert paused.state is RunState.PAUSED  # never waiting: no interrupt is pending
    assert paused.interrupts == []
    assert any("runs again from its start" in n for n in paused.action_notes[Action.RESUME])
    steps = await adapter.journal(tid)
    assert (steps[-1].name, steps[-1].status) == ("slow", "in_flight")
    assert "runs again from its start on resume" in steps[-1].detail
    observation = await adapter.observe()
    assert not [i for i in observation.interrupts if i.run_id == paused.id]

    await adapter.resume(tid, reason="done", identity="ann")

    values = server.wait_status(tid, "idle", timeout=60)["values"]
    assert values["log"] == ["prepare", "slow"]  # prepare ran once: continued, not restarted
    assert (await adapter.get_run(tid)).state is RunState.COMPLETED


async def test_a_thread_parked_at_an_interrupt_cannot_be_paused(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    with pytest.raises(Conflict, match="parked at an interrupt"):
        await adapter.pause(tid, reason="", identity="ann")
    assert server.thread(tid)["status"] == "interrupted"


async def test_cancelling_a_waiting_run_takes_it_out_of_the_inbox(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.run_until_interrupted("inbox", {})
    before = await adapter.observe()
    assert [i for i in before.interrupts if i.run_id.endswith(tid)]

    await adapter.cancel(tid, reason="not needed", identity="ann")

    after = await adapter.observe()
    assert not [i for i in after.interrupts if i.run_id.endswith(tid)]
    run = next(r for r in after.runs if r.native_id == tid)
    assert run.state is RunState.CANCELLED
    thread = server.thread(tid)
    assert thread["status"] == "idle" and not thread["interrupts"]
    assert "response" not in (thread["values"] or {})  # the graph never got an answer


async def test_cancelling_a_busy_run_is_cancelled_never_waiting_and_cannot_be_resumed(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = started_slow_node(server, seconds=30)
    await adapter.cancel(tid, reason="stop", identity="ann")
    thread = server.thread(tid)
    # what the Agent Server shows for a cancelled run: interrupted, no interrupts
    assert thread["status"] == "interrupted" and not thread["interrupts"]
    run = await adapter.get_run(tid)
    assert run.state is RunState.CANCELLED
    with pytest.raises(Conflict, match="cancelled"):
        await adapter.resume(tid, reason="", identity="ann")
    with pytest.raises(Unsupported):
        await adapter.terminate(tid, reason="", identity="ann")


async def test_a_run_cancelled_outside_irq_shows_paused_not_waiting(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = started_slow_node(server, seconds=30)
    (active,) = [r for r in server.runs(tid) if r["status"] in ("pending", "running")]
    server.http.post(f"/threads/{tid}/runs/{active['run_id']}/cancel",
                     params={"action": "interrupt", "wait": "true"})
    run = await adapter.get_run(tid)
    assert run.state is RunState.PAUSED
    assert run.native_state == "interrupted/UserInterrupt"
    assert any("stopped outside irq" in w for w in run.warnings)


async def test_server_down_is_unreachable_then_recovers(tmp_path: Path):
    server = start_agent_server(tmp_path / "own")
    client = ServerClient(server.url)
    try:
        tid = client.run_until_interrupted("inbox", {})
        adapter = open_backend(server.backend_url(timeout=2), MemoryPauseLedger())
        assert isinstance(adapter, LangGraphBackend)
        await adapter.start()
        assert any(r.native_id == tid for r in (await adapter.observe()).runs)

        server.stop()
        with pytest.raises(Unreachable, match="unreachable"):
            await adapter.observe()
        with pytest.raises(Unreachable):
            await adapter.get_run(tid)

        server.start()  # same port, same directory: the in-memory runtime reloads its file
        observation = await adapter.observe()
        run = next(r for r in observation.runs if r.native_id == tid)
        assert run.state is RunState.WAITING
        assert [i.run_id for i in observation.interrupts] == [run.id]
        await adapter.close()
    finally:
        client.close()
        server.stop()
