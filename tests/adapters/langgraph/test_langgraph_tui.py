"""The console driven by keyboard (Pilot) against a real ``irq serve --backend langgraph+http://``
over a real ``langgraph dev``: a plain LangGraph interrupt is approved from the inbox through the
confirm dialog, and the thread's own state on the Agent Server shows it arrived exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_scenarios import ServerClient

from backend_adapters.langgraph.dev_server import AgentServer
from console.model import Interrupt
from console.processes import stop_process
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.inbox import InboxScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from tests.cli.cli_harness import ServedGateway, start_gateway
from tests.tui.tui_pilot import filter_list, type_text, until

pytestmark = pytest.mark.slow


@pytest.fixture
def gateway(
    agent_server: AgentServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServedGateway]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IRQ_HOME", str(home))
    for var in ("IRQ_URL", "IRQ_TOKEN", "IRQ_CONTEXT", "IRQ_ASCII", "IRQ_THEME", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    served = start_gateway(home, [agent_server.backend_url(poll=0.3)])
    try:
        yield served
    finally:
        stop_process(served.process)


def pending_of(app: IrqApp, run_id: str) -> Interrupt | None:
    return next((i for i in app.view.pending_interrupts() if i.run_id == run_id), None)


async def test_approve_a_langgraph_interrupt_from_the_inbox_arrives_once(
    gateway: ServedGateway, server: ServerClient
) -> None:
    tid = server.run_until_interrupted("inbox", {"allow": {"edit": False}})
    run_id = f"langgraph:local/{tid}"
    app = IrqApp(LiveSource(gateway.url, gateway.operator), context="test")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: pending_of(app, run_id), "the LangGraph interrupt")
        intr = pending_of(app, run_id)
        assert intr is not None and intr.action == "send_email"

        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "the inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        await filter_list(pilot, tid)
        await until(pilot, lambda: (s := inbox.selected_interrupt()) is not None
                    and s.id == intr.id, f"{intr.id} selected in the inbox")

        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "approve dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog) and dialog.targets == [intr.id]
        await type_text(pilot, "tui langgraph approve")
        await pilot.press("tab")
        assert app.focused is not None and app.focused.id == "no", "No comes before Yes"
        await pilot.press("tab")
        assert app.focused is not None and app.focused.id == "yes"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "per-item results")
        results = app.screen
        assert isinstance(results, ResultsDialog)
        assert [(r.target, r.outcome) for r in results.results] == [(intr.id, "applied")]
        await pilot.press("enter")
        await until(pilot, lambda: (i := app.view.interrupts.get(intr.id)) is None
                    or i.status != "pending", f"{intr.id} no longer pending")

    # the thread's own state on the Agent Server, not irq's view of it
    values = server.wait_status(tid, "idle")["values"]
    assert values["response"] == {"type": "accept", "args": None}
    assert values["log"] == ["draft", "review", "act"]
    resumes = [r for r in server.runs(tid) if (r.get("kwargs") or {}).get("command")]
    assert len(resumes) == 1
