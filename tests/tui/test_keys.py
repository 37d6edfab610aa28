"""Keys: every action has a single portable key with an id (remappable), a ':' command and
a palette entry; the config file's [keys] table remaps them."""

from __future__ import annotations

import re

from textual.binding import Binding
from tui_pilot import until

from console.tui.app import IrqApp, _class_bindings
from console.tui.command_line import BY_NAME
from console.tui.fleet_source import RecordedSource
from console.tui.screens.audit import AuditScreen
from console.tui.screens.base import DECISIONS, RUN_ACTIONS
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.run_table import RunTable

PORTABLE = re.compile(
    r"^([a-zA-Z0-9]|f([1-9]|10)|up|down|left|right|pageup|pagedown|home|end|enter|escape|tab"
    r"|ctrl\+[a-z]|question_mark|slash|colon)$")


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


async def test_keymap_from_config_remaps_pause(tmp_path):
    source = RecordedSource({"snapshot": {"runs": []}})
    app = IrqApp(source, keymap={"pause": "z"}, ping_interval=0)
    async with app.run_test() as pilot:
        await pilot.pause(0.2)
        keys = {b.binding.action: key for key, b in app.screen.active_bindings.items()}
        assert keys["pause"] == "z"
        assert [b for b in _class_bindings(app.screen) if b.id == "pause"]


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
