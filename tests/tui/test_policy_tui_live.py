"""The obligations screen against a real gateway (``Gateway`` with a policy file, in this
process): an agent opens two obligations over the agent channel, the console lists them from
the gateway's snapshot and events, the one due in a second turns overdue by the gateway's own
scanner, and the operator fulfils the other from the screen; the gateway records the note and
who fulfilled it, and the console shows the fulfilled obligation from its event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_snapshots import screen_text
from tui_pilot import type_text, until

from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Role
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from console.tui.screens.obligations import ObligationsScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from tests.gateway.agent_wire import agent

POLICY = """
default = "permit"

[data_classes]
phi = ["sensitive"]

[[rules]]
id = "phi-read-notify"
modality = "oblige"
action = ["read_records"]
object = ["phi"]
what = "notify the CISO"
within_s = 600
"""


@dataclass
class PolicyGateway:
    url: str
    tokens: dict[str, str]


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[PolicyGateway]:
    monkeypatch.setenv("IRQ_HOME", str(tmp_path))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    tokens = {
        "agent": create_token(Role.AGENT, "agent-a", tmp_path, scopes=["dbos:local"]),
        "operator": create_token(Role.OPERATOR, "ops", tmp_path),
    }
    gw = Gateway(GatewaySettings(
        port=0, home=tmp_path, flush_interval_s=0.02, policy_path=policy,
        backends=[f"dbos+sqlite:///{tmp_path}/none/a.db?context=local&poll=5"]))
    await gw.start()
    try:
        yield PolicyGateway(f"ws://127.0.0.1:{gw.port}", tokens)
    finally:
        await gw.stop()


def obligation_frame(native_id: str, call_id: str, what: str, within_s: float) -> dict[str, Any]:
    run_id = f"dbos:local/{native_id}"
    now = datetime.now(UTC)
    ob = {"id": f"{run_id}#{call_id}/phi-read-notify", "rule": "phi-read-notify",
          "run_id": run_id, "what": what, "created_at": now.isoformat(),
          "due_at": (now + timedelta(seconds=within_s)).isoformat(), "state": "open",
          "tool": "read_records", "policy_version": "sha256:x"}
    return {"type": "policy_event", "event": "obligation", "backend": "dbos",
            "context": "local", "native_id": native_id, "obligation": ob}


async def test_operator_fulfils_an_obligation_and_sees_another_turn_overdue(gateway):
    soon = obligation_frame("wf-1", "1", "tell legal", within_s=1.0)
    later = obligation_frame("wf-2", "1", "notify the CISO", within_s=600)
    soon_id, later_id = soon["obligation"]["id"], later["obligation"]["id"]
    app = IrqApp(LiveSource(gateway.url, gateway.tokens["operator"]), context="test",
                 ping_interval=0)
    async with agent(gateway.url, gateway.tokens["agent"]) as wire, \
            app.run_test(size=(80, 24)) as pilot:
        await wire.send_raw(json.dumps(later))
        await until(pilot, lambda: app.status.state == "live", "connected", timeout=30)
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ObligationsScreen), "obligations")
        screen = app.screen
        assert isinstance(screen, ObligationsScreen)
        await until(pilot, lambda: later_id in screen._shown, "the open obligation")  # noqa: SLF001
        await wire.send_raw(json.dumps(soon))  # an event, after the snapshot
        await until(pilot, lambda: (o := app.view.obligations.get(soon_id)) is not None
                    and o.state == "overdue", "the gateway's overdue scan", timeout=30)
        await until(pilot, lambda: screen._shown == [soon_id, later_id], "overdue first")  # noqa: SLF001
        await pilot.pause(0.3)
        assert "overdue by" in screen_text(app)

        screen.table.move_cursor(row=1)
        await pilot.pause(0.1)
        assert screen.selected_obligation() is not None
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await type_text(pilot, "CISO paged")
        await pilot.press("tab", "tab")
        assert app.focused is not None and app.focused.id == "yes"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "the results")
        results = app.screen
        assert isinstance(results, ResultsDialog)
        assert [r.outcome for r in results.results] == ["applied"], results.results
        await pilot.press("escape")
        await until(pilot, lambda: (o := app.view.obligations.get(later_id)) is not None
                    and o.state == "fulfilled", "the fulfilled event", timeout=30)
        done = app.view.obligations[later_id]
        assert done.note == "CISO paged" and done.by == "ops"
        await until(pilot, lambda: screen._shown == [soon_id, later_id], "closed last")  # noqa: SLF001
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "fulfilled" in text and "Obligations: 1 open, 1 overdue" in text
