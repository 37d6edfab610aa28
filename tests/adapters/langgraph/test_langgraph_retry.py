"""Failed threads and retry on a real Agent Server: a plain three-node graph whose third node
raises while a flag file exists; each node counts its runs in a file outside LangGraph. After
the failure irq shows the node that raised; a retry forks from the checkpoint before it, so
the first two nodes ran once and the third twice; the same command again sends nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from langgraph_scenarios import ServerClient, eventually

from backend_adapters.base import Conflict, InvalidInput
from backend_adapters.langgraph.adapter import LangGraphBackend
from console.model import Action, RunState


def effects(workdir: Path) -> Counter[str]:
    log = workdir / "effects.log"
    return Counter(log.read_text().split()) if log.exists() else Counter()


def failed_thread(server: ServerClient, workdir: Path) -> str:
    (workdir / "outage.flag").touch()
    tid = server.start("flaky", {"workdir": str(workdir)})
    server.wait_status(tid, "error")
    return tid


async def test_failed_run_names_the_node_and_retry_reruns_only_from_it(
    adapter: LangGraphBackend, server: ServerClient, tmp_path: Path
):
    tid = failed_thread(server, tmp_path)

    run = await adapter.get_run(tid)
    assert run.state is RunState.FAILED
    assert run.error is not None and run.error.step == "notify"
    assert run.error.type == "ConnectionError" and "mail relay refused" in run.error.message
    assert run.last_step_at is not None and Action.RETRY in run.action_notes
    polled = {r.native_id: r for r in (await adapter.observe()).runs}[tid]
    assert polled.error is not None and polled.error.step == "notify"

    plan = await adapter.retry_plan(tid, from_step=None)
    assert (plan.steps_kept, plan.will_rerun) == (["fetch", "charge"], ["notify"])
    assert plan.unjournaled_effects == ["notify"] and not plan.new_run
    by_node = await adapter.retry_plan(tid, from_step="charge")
    by_index = await adapter.retry_plan(tid, from_step="1")  # the journal's step number
    assert by_node.steps_kept == by_index.steps_kept == ["fetch"]
    assert by_node.will_rerun == by_index.will_rerun == ["charge", "notify"]
    with pytest.raises(InvalidInput, match="no checkpoint before node"):
        await adapter.retry_plan(tid, from_step="nope")

    (tmp_path / "outage.flag").unlink()
    outcome = await adapter.retry(
        tid, from_step=None, request_id="cmd-1", reason="relay fixed", identity="ann"
    )
    assert "notify" in outcome.detail
    server.wait_status(tid, "idle")
    assert effects(tmp_path) == Counter(fetch=1, charge=1, notify=2)
    assert (await adapter.get_run(tid)).state is RunState.COMPLETED

    runs_before = len(server.runs(tid))
    again = await adapter.retry(
        tid, from_step=None, request_id="cmd-1", reason="double click", identity="ann"
    )
    assert again.detail.startswith("already retried")
    assert len(server.runs(tid)) == runs_before
    assert effects(tmp_path) == Counter(fetch=1, charge=1, notify=2)


async def test_retry_of_a_running_thread_is_refused_with_what_to_do(
    adapter: LangGraphBackend, server: ServerClient
):
    tid = server.start("slow", {"seconds": 30})
    eventually(lambda: server.thread(tid)["status"] == "busy", "the slow run to start")
    with pytest.raises(Conflict, match="cancel it"):
        await adapter.retry_plan(tid, from_step=None)
    with pytest.raises(Conflict, match="running"):
        await adapter.retry(tid, from_step=None, request_id="k", reason="", identity="ann")
