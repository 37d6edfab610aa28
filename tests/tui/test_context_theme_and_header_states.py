"""IRQ_THEME=ansi, ':ctx' (switching context), and the header's reconnecting and stale states,
each driven as an operator meets them: through ``build_app`` and a real config file, against
the live fleet's gateway, and against an ``irq serve`` of the test's own that is stopped and
started again, with a backend that is down.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_pilot import type_text, until

from console.config import Connection, config_path, resolve_connection
from console.gateway.auth import create_token
from console.model import Role
from console.processes import ChildProcess, free_port
from console.tui.app import IrqApp, build_app
from console.tui.fleet_source import LiveSource
from console.tui.widgets.status_header import StatusHeader
from devtools.live_fleet import LiveFleet

RECORDED = Path(__file__).parent / "data" / "recorded_fleet.json"


def header_of(app: IrqApp) -> StatusHeader:
    return app.screen.query_one(StatusHeader)


def header_line(app: IrqApp) -> str:
    return str(header_of(app).content)


class Notes:
    """What the app tells the operator (notify), to wait for it."""

    def __init__(self, app: IrqApp) -> None:
        self.messages: list[str] = []
        notify = app.notify

        def recording(message: str, *args: object, **kwargs: object) -> None:
            self.messages.append(message)
            notify(message, *args, **kwargs)  # type: ignore[arg-type]

        app.notify = recording  # type: ignore[method-assign]


# ------------------------------------------------------------------------------ theme


@pytest.mark.parametrize("theme", ["ansi", "dark"])
async def test_irq_theme_ansi_keeps_the_terminals_own_palette(theme, monkeypatch):
    """IRQ_THEME=ansi through build_app: the ANSI theme, so backgrounds are the terminal's
    default colour (ANSI -1), not an RGB of ours; the dark theme paints its own."""
    monkeypatch.setenv("IRQ_THEME", theme)
    monkeypatch.setenv("IRQ_TUI_RECORDED", str(RECORDED))
    app = build_app(Connection("ws://127.0.0.1:9", None, "demo"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.state == "recorded" and app.index.visible,
                    "the recorded fleet")
        header = header_of(app)
        backgrounds = (header.styles.background, app.screen.styles.background)
        if theme == "ansi":
            assert app.theme == "ansi-dark" and app.native_ansi_color
            assert header.has_pseudo_class("ansi")
            assert [c.ansi for c in backgrounds] == [-1, -1], backgrounds  # terminal default
        else:
            assert app.theme == "textual-dark" and not app.native_ansi_color
            assert [c.ansi for c in backgrounds] == [None, None], backgrounds


# ------------------------------------------------------------------------------ :ctx


async def test_ctx_switches_to_another_context_of_the_config_file(live_fleet: LiveFleet):
    """':ctx ro' moves the console to the context 'ro' (another token, read-only): the header,
    the identity and what may be done follow; ':ctx nope' is a clear error, the console stays."""
    path = config_path()
    path.write_text(
        'current_context = "ops"\n\n'
        f'[contexts.ops]\nurl = "{live_fleet.url}"\ntoken = "{live_fleet.tokens["operator"]}"\n\n'
        f'[contexts.ro]\nurl = "{live_fleet.url}"\ntoken = "{live_fleet.tokens["viewer"]}"\n'
        "read_only = true\n"
    )
    path.chmod(0o600)
    app = build_app(resolve_connection())
    notes = Notes(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.state == "live" and app.source.role == "operator",
                    "live as the operator in context ops")
        assert app.context == "ops" and app.may_mutate() == (True, "")
        first_source = app.source

        await pilot.press("colon")
        await type_text(pilot, "ctx ro")
        await pilot.press("enter")
        await until(pilot, lambda: app.context == "ro" and app.status.state == "live"
                    and app.source.role == "viewer", "live as the viewer in context ro")
        assert app.source is not first_source and app.read_only
        assert app.may_mutate() == (False, "context ro is read-only")
        await until(pilot, lambda: " ro " in header_line(app) and "read-only" in header_line(app)
                    and "viewer" in header_line(app), "the header to name the new context")
        assert any(m.startswith("switched to context ro") for m in notes.messages), notes.messages
        await until(pilot, lambda: app.index.visible, "the fleet of the new context")

        await pilot.press("colon")
        await type_text(pilot, "ctx nope")
        await pilot.press("enter")
        await until(pilot, lambda: len(notes.messages) >= 2, "an error for an unknown context")
        assert "nope" in notes.messages[-1], notes.messages
        assert app.context == "ro" and app.status.state == "live"  # still there, still live


# ------------------------------------------------------------- header: reconnecting, stale


class OwnGateway:
    """``irq serve`` of this test's own (so it can be stopped), with one backend that is down:
    a Temporal URL on a port where nothing listens."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.down_backend = f"temporal+http://127.0.0.1:{free_port()}/default"
        self.token = create_token(Role.OPERATOR, "hdr-operator", home)
        self.child: ChildProcess | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.child = ChildProcess(
            "gateway",
            [sys.executable, "-m", "console.cli.app", "serve", "--port", str(self.port),
             "--backend", self.down_backend],
            self.home / "gateway.log",
            {"IRQ_HOME": str(self.home)},
        )
        self.child.start()
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert self.child.alive(), self.child.log_tail()
            assert time.monotonic() < deadline, "irq serve did not listen:\n" + self.child.log_tail()
            time.sleep(0.1)

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


@pytest.fixture
def own_gateway(tmp_path: Path) -> Iterator[OwnGateway]:
    home = tmp_path / "gw"
    home.mkdir()
    gateway = OwnGateway(home)
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.stop()


async def test_header_shows_stale_for_a_backend_down_and_reconnecting_without_the_gateway(
    own_gateway: OwnGateway,
):
    app = IrqApp(LiveSource(own_gateway.url, own_gateway.token), context="hdr")
    async with app.run_test(size=(160, 48)) as pilot:
        # live, but a backend is down: STALE, naming the backend
        await until(pilot, lambda: app.status.state == "live", "live")
        await until(pilot, lambda: "STALE" in header_line(app)
                    and "temporal:local unreachable" in header_line(app),
                    "STALE naming the unreachable backend")
        assert "live" in header_line(app)

        # the gateway goes away: reconnecting, attempts counted, STALE
        own_gateway.stop()
        await until(pilot, lambda: app.status.state == "reconnecting"
                    and app.status.attempts >= 1, "reconnecting")
        await until(pilot, lambda: "reconnecting" in header_line(app)
                    and "STALE" in header_line(app), "the header to say so")

        # back on the same port: live again (the backend is still down: still STALE for it)
        own_gateway.start()
        await until(pilot, lambda: app.status.state == "live", "live again", timeout=60)
        await until(pilot, lambda: "reconnecting" not in header_line(app)
                    and "live" in header_line(app), "the header to say live")
        assert "temporal:local unreachable" in header_line(app)
