"""Keys: every action has a single portable key with an id (remappable), a ':' command and
a palette entry; the config file's [keys] table remaps them."""

from __future__ import annotations

import re

from test_snapshots import screen_text
from textual.binding import Binding
from tui_pilot import filter_list, type_text, until

from console.config import config_path, resolve_connection
from console.model import RunState
from console.tui.app import IrqApp, build_app
from console.tui.command_line import BY_NAME
from console.tui.fleet_source import RecordedSource
from console.tui.screens.audit import AuditScreen
from console.tui.screens.base import DECISIONS, RUN_ACTIONS
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.run_table import RunTable
from console.tui.widgets.status_header import StatusHeader
from devtools.live_fleet import LiveFleet

PORTABLE = re.compile(
    r"^([a-zA-Z0-9]|f([1-9]|10)|up|down|left|right|pageup|pagedown|home|end|enter|escape|tab"
    r"|ctrl\+[a-z]|question_mark|slash|colon|space|asterisk)$")


def bindings(*classes: type) -> list[Binding]:
    out: list[Binding] = []
    for cls in classes:
        for klass in cls.__mro__:
            if not klass.__module__.startswith("console."):
                continue  # Textual's own (ctrl+q, scrolling) are not ours to vet
            out += [b for b in klass.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]
    return out


def test_every_binding_has_an_id_a_description_and_portable_keys():
    for binding in bindings(IrqApp, FleetScreen, InboxScreen, RunDetailScreen, AuditScreen,
                            RunTable):
        assert binding.id, binding
        assert binding.description, binding
        for key in binding.key.split(","):
            assert PORTABLE.match(key.strip()), f"{key!r} is not a portable key"


def test_every_action_has_a_key_where_it_applies_and_a_colon_command():
    for screen in (FleetScreen, RunDetailScreen):
        ids = {b.id for b in bindings(screen)}
        assert set(RUN_ACTIONS) | set(DECISIONS) <= ids, screen
    assert set(DECISIONS) <= {b.id for b in bindings(InboxScreen)}
    for name in [*RUN_ACTIONS, *DECISIONS, "runs", "inbox", "audit", "ctx", "help"]:
        assert name in BY_NAME
    for screen in (FleetScreen, InboxScreen, RunDetailScreen, AuditScreen):
        ids = {b.id for b in bindings(screen)}
        assert {"help", "filter", "command", "back"} <= ids
    assert {"view_fleet", "view_inbox", "view_audit"} <= {b.id for b in _class_bindings_of()}


def _class_bindings_of() -> list[Binding]:
    return bindings(IrqApp)


def write_config(fleet: LiveFleet, *, read_only: bool = False, keys: str = "") -> None:
    """A real config file in IRQ_HOME (the autouse fixture points it at tmp_path)."""
    text = (
        'current_context = "live"\n\n[contexts.live]\n'
        f'url = "{fleet.url}"\ntoken = "{fleet.tokens["operator"]}"\n'
        f"read_only = {'true' if read_only else 'false'}\n"
    )
    if keys:
        text += f"\n[keys]\n{keys}\n"
    path = config_path()
    path.write_text(text)
    path.chmod(0o600)


def running_run(app: IrqApp) -> str | None:
    for run_id, row in app.index.rows.items():
        if row.state is RunState.RUNNING and row.run.resources and (row.run.progress or 0) < 0.5:
            return run_id
    return None


async def test_keymap_from_the_config_file_remaps_pause_through_build_app(live_fleet):
    """[keys] pause = "z" in config.toml: build_app reads it, and z opens the pause dialog."""
    write_config(live_fleet, keys='pause = "z"')
    app = build_app(resolve_connection())
    assert app.context == "live" and not app.read_only and not app.ascii_only
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.state == "live" and running_run(app),
                    "a running run")
        run_id = running_run(app)
        assert run_id
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        await filter_list(pilot, run_id.split("/", 1)[1])
        assert fleet.table.selected_id == run_id
        keys = {b.binding.action: key for key, b in fleet.active_bindings.items()}
        assert keys["pause"] == "z" and "p" not in fleet.active_bindings
        await pilot.press("z")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the pause dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.verb == "pause" and dialog.targets == [run_id]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is fleet and not app.mutation_pending, "closed")


async def test_a_read_only_context_and_irq_ascii_through_build_app(live_fleet, monkeypatch):
    """read_only = true in the context and IRQ_ASCII=1: build_app applies both; mutations are
    dimmed and refused (the console stays up), the header says read-only, borders are ASCII."""
    write_config(live_fleet, read_only=True)
    monkeypatch.setenv("IRQ_ASCII", "1")
    app = build_app(resolve_connection())
    assert app.read_only and app.ascii_only
    notes: list[str] = []
    notify = app.notify

    def recording(message: str, *args: object, **kwargs: object) -> None:
        notes.append(message)
        notify(message, *args, **kwargs)  # type: ignore[arg-type]

    app.notify = recording  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.state == "live" and running_run(app),
                    "a running run")
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        assert app.may_mutate() == (False, "context live is read-only")
        for key in ("p", "r", "c", "x"):
            assert fleet.active_bindings[key].enabled is False, f"{key} is dimmed"
        header = fleet.query_one(StatusHeader)
        await until(pilot, lambda: "read-only" in str(header.content), "read-only in the header")
        run_id = running_run(app)
        await pilot.press("p", "colon")  # a dimmed key, then a command the app must refuse
        await type_text(pilot, f"pause {run_id}")
        await pilot.press("enter")
        await until(pilot, lambda: notes, "the refusal")
        assert notes == ["pause: context live is read-only"], notes
        assert app.screen is fleet and not app.mutation_pending
        # the help screen, a bordered dialog, in ASCII
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.pause(0.3)
        text = screen_text(app)
        assert not {c for c in text if 0x2500 <= ord(c) <= 0x257F}, "box-drawing in ASCII mode"


async def test_keys_typed_right_after_slash_land_in_the_filter_not_on_the_table():
    """Over SSH '/state:late' arrives in one packet: every key after '/' is filter text."""
    from textual import events

    from console.tui.widgets.command_bar import CommandBar

    source = RecordedSource({"snapshot": {"runs": []}})
    app = IrqApp(source, ping_interval=0)
    async with app.run_test() as pilot:
        await pilot.pause(0.2)
        for key, char in (("slash", "/"), ("p", "p"), ("c", "c"), ("x", "x")):
            app.post_message(events.Key(key, char))
        await until(pilot, lambda: app.index.query.text == "pcx", "the filter applied")
        assert app.screen.query_one(CommandBar).input.value == "pcx"
        assert not app.mutation_pending
