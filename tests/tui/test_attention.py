"""The TUI calls for attention: bell and desktop notifications (OSC 9 / OSC 777) written to
the terminal for a new interrupt when the config asks for them, nothing by default, a flood
summarised, agent text made safe inside the OSC; ``y`` copies the selected id (OSC 52).

A real gateway in the test's event loop (its hub fed through its own API, as an adapter
would), the console connected to it over a websocket, driven with Pilot; what the app writes
to the terminal is captured at Textual's driver."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.gateway.auth import create_token
from console.gateway.server import Gateway
from console.gateway.settings import GatewaySettings
from console.model import Interrupt, Role, Run, RunState, utcnow
from console.notify_config import NotifySettings
from console.tui.app import IrqApp
from console.tui.fleet_source import LiveSource
from tests.tui.tui_pilot import until

RUN = "dbos:local/job-1"


@dataclass
class Hub:
    gateway: Gateway
    url: str
    token: str

    def interrupt(self, n: int, title: str = "") -> str:
        iid = f"{RUN}#i{n}"
        intr = Interrupt(id=iid, run_id=RUN, native_id=f"i{n}", created_at=utcnow(),
                         title=title or f"approve step {n}")
        self.gateway.hub.observe_interrupts("dbos:local", [intr], complete=False,
                                            decided=lambda _iid: None)
        return iid


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    token = create_token(Role.OPERATOR, "ops", tmp_path)
    gw = Gateway(GatewaySettings(
        port=0, home=tmp_path, flush_interval_s=0.02,
        backends=[f"dbos+sqlite:///{tmp_path}/none/a.db?context=local&poll=5"]))
    await gw.start()
    gw.hub.observe_runs([Run(id=RUN, backend="dbos", context="local", native_id="job-1",
                             name="job-1", state=RunState.RUNNING)])
    try:
        yield Hub(gw, f"ws://127.0.0.1:{gw.port}", token)
    finally:
        await gw.stop()


def capture(app: IrqApp) -> list[str]:
    """Everything the app writes to its terminal from now on."""
    written: list[str] = []
    driver: Any = app._driver
    original = driver.write

    def write(data: str) -> None:
        written.append(data)
        original(data)

    driver.write = write
    return written


def alerts(written: list[str]) -> list[str]:
    return [w for w in written if w.startswith("\x07") or w.startswith("\x1b]9;")
            or w.startswith("\x1b]777;")]


def make_app(hub: Hub, notify: NotifySettings | None = None) -> IrqApp:
    return IrqApp(LiveSource(hub.url, hub.token), context="test", notify=notify)


async def test_new_interrupt_rings_and_notifies_through_osc_9(hub: Hub) -> None:
    app = make_app(hub, NotifySettings(bell=["interrupt"], desktop=["interrupt"]))
    async with app.run_test(size=(120, 30)) as pilot:
        written = capture(app)
        await until(pilot, lambda: RUN in app.view.runs, "the snapshot")
        hub.interrupt(1, title="deploy\x1b]0;pwned\x07 now")
        await until(pilot, lambda: alerts(written), "the alert")
        assert len(alerts(written)) == 1
        alert = alerts(written)[0]
        assert alert.startswith("\x07\x1b]9;irq: New interrupt: deploy\\x1b]0,pwned\\x07 now")
        assert alert.endswith("\x07") and alert.count("\x1b") == 1  # one OSC, nothing smuggled
        assert not any("\x1b]0;pwned" in w for w in written)


async def test_osc_777_bell_off_and_a_flood_summarised(hub: Hub) -> None:
    notify = NotifySettings(desktop=["interrupt"], osc="777", per_kind=2, window_s=1.0)
    app = make_app(hub, notify)
    async with app.run_test(size=(120, 30)) as pilot:
        written = capture(app)
        await until(pilot, lambda: RUN in app.view.runs, "the snapshot")
        for n in range(10):
            hub.interrupt(n)
        await until(pilot, lambda: len(alerts(written)) >= 3, "two alerts and the summary",
                    timeout=10)
        await pilot.pause(1.2)
        sent = alerts(written)
        assert len(sent) == 3
        assert all(s.startswith("\x1b]777;notify;irq: ") for s in sent)  # no BEL: bell off
        assert sent[2] == "\x1b]777;notify;irq: irq;and 8 more new interrupts in the last 1 s\x07"


async def test_off_by_default_writes_nothing(hub: Hub) -> None:
    app = make_app(hub)
    async with app.run_test(size=(120, 30)) as pilot:
        written = capture(app)
        await until(pilot, lambda: RUN in app.view.runs, "the snapshot")
        iid = hub.interrupt(1)
        await until(pilot, lambda: iid in app.view.interrupts, "the interrupt")
        await pilot.pause(0.3)
        assert alerts(written) == [] and app.attention.alerts == 0


async def test_y_copies_the_selected_id_through_osc_52(hub: Hub) -> None:
    app = make_app(hub)
    async with app.run_test(size=(120, 30)) as pilot:
        written = capture(app)
        iid = hub.interrupt(1)
        await until(pilot, lambda: iid in app.view.interrupts, "the interrupt")
        await until(pilot, lambda: app.index.row(RUN) is not None, "the run's row")
        await pilot.pause(0.2)
        await pilot.press("y")  # fleet: the run's id
        assert app.clipboard == RUN
        assert f"\x1b]52;c;{base64.b64encode(RUN.encode()).decode()}\x07" in written
        await pilot.press("2")  # inbox: the interrupt's id
        await pilot.pause(0.3)
        await pilot.press("y")
        assert app.clipboard == iid
        assert f"\x1b]52;c;{base64.b64encode(iid.encode()).decode()}\x07" in written
        assert any(f"copied {iid}" in str(n.message) for n in app._notifications)
        await pilot.press("question_mark")  # the help screen lists the key
        await pilot.pause(0.2)
        rows = getattr(app.screen, "rows", [])
        assert any(r.binding_id == "copy_id" and r.keys == "y" and r.description == "copy id"
                   for r in rows)
