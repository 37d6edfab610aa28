"""The policy layer in the console: the obligations screen (``o``: overdue first, live from
``obligation`` events, fulfil/waive through the confirm dialog), the rule an interrupt was
raised under in the inbox, and a run's policy decisions in run detail.

Rendered from the recorded demo fleet (tests/tui/data/recorded_fleet.json) with policy data
added in the gateway's JSON shapes (docs: snapshot ``obligations``, events ``obligation``,
interrupt ``policy``, the ``run`` query's ``policy_decisions``); the clock is frozen at the
recording's time so deadlines read the same on every machine.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from test_snapshots import not_ascii, screen_text
from tui_pilot import type_text, until

from console.model import Action, CommandResult, Decision
from console.tui.app import IrqApp
from console.tui.fleet_source import RecordedSource, StatusCallback, UpdateCallback
from console.tui.screens.help import HelpScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.obligations import ObligationsScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from console.tui.widgets.status_header import StatusHeader

DATA = Path(__file__).parent / "data" / "recorded_fleet.json"


def obligation(ob_id: str, run_id: str, what: str, at: datetime, due_in_s: float | None,
               state: str = "open", **extra: Any) -> dict[str, Any]:
    return {"id": ob_id, "rule": extra.pop("rule", "phi-notify-ciso"), "run_id": run_id,
            "what": what, "created_at": (at - timedelta(minutes=5)).isoformat(),
            "due_at": (at + timedelta(seconds=due_in_s)).isoformat()
            if due_in_s is not None else None,
            "state": state, "tool": "read_record", **extra}


class PolicyFleet(RecordedSource):
    """The recorded fleet plus policy data; named commands are kept (``sent``) and answered
    ``applied``, and ``push`` delivers events the way the live session does (applied to the
    client's view, then handed to the app)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data, url="recorded")
        self.sent: list[tuple[str, list[str], str]] = []
        self._on_update: UpdateCallback | None = None

    async def run(self, on_update: UpdateCallback, on_status: StatusCallback) -> None:
        self._on_update = on_update
        await super().run(on_update, on_status)

    def push(self, *events: dict[str, Any]) -> None:
        applied = []
        for event in events:
            event = {**event, "seq": self.view.seq + 1}
            if self.view.apply(event):
                applied.append(event)
        assert self._on_update is not None, "the app has not started the feed"
        self._on_update(self.view, applied)

    async def command(self, action: Action | str, targets: list[str], *, reason: str = "",
                      dry_run: bool = False,
                      decision: Decision | None = None) -> list[CommandResult]:
        """A decision on the four-eyes interrupt is counted, not delivered (the gateway's
        ``recorded`` outcome for the first of two approvers)."""
        if Action(action) is not Action.DECIDE or dry_run:
            return await super().command(action, targets, reason=reason, dry_run=dry_run,
                                         decision=decision)
        self.sent.append(("decide", list(targets), reason))
        return [CommandResult(id="k2", action="decide", target=t, outcome="recorded",
                              detail=f"approval 1 of 2 recorded by {self.identity} under rule "
                                     "refund-large; needs another approver") for t in targets]

    async def named_command(self, action: str, targets: list[str], *, reason: str = "",
                            extra: dict[str, Any] | None = None) -> list[CommandResult]:
        self.sent.append((action, list(targets), reason))
        return [CommandResult(id="k1", action=action, target=t, outcome="applied",
                              detail=f"{action} sent") for t in targets]


def policy_data() -> tuple[dict[str, Any], datetime]:
    data = json.loads(DATA.read_text())
    at = datetime.fromisoformat(data["recorded_at"])
    run_ids = list(data["runs"])
    data["snapshot"]["obligations"] = [
        obligation(f"{run_ids[0]}#7/phi-notify-ciso", run_ids[0], "notify the CISO", at, 600),
        obligation(f"{run_ids[1]}#3/phi-notify-ciso", run_ids[1], "file the access log", at,
                   120, rule="phi-log"),
        obligation(f"{run_ids[2]}#2/phi-notify-ciso", run_ids[2], "tell legal", at, -180,
                   state="overdue"),
        obligation(f"{run_ids[0]}#1/phi-notify-ciso", run_ids[0], "notify the CISO", at, -900,
                   state="fulfilled", by="alice", note="called her"),
    ]
    data["snapshot"]["policy"] = {"version": "sha256:0123456789abcdef", "source": "policy.toml"}
    intr = next(i for i in data["snapshot"]["interrupts"]
                if "edit" in i["allowed_decisions"] and i["args_schema"])
    intr["policy"] = {"rule": "refund-large", "why": "refunds over 100 EUR need a human",
                      "decide_role": "admin", "approvers": 2, "policy_version": "sha256:0123",
                      "approvals": [{"by": "alice", "at": at.isoformat()}]}
    data["runs"][run_ids[0]]["policy_decisions"] = [
        {"at": (at - timedelta(seconds=40)).isoformat(), "call_id": "3", "tool": "read_record",
         "outcome": "permit", "winner": "phi-read", "rules": ["phi-read", "phi-notify-ciso"],
         "policy_version": "sha256:0123", "explanation": ["phi-read permits"]},
        {"at": (at - timedelta(seconds=20)).isoformat(), "call_id": "4",
         "tool": "delete_backup", "outcome": "prohibit", "winner": "no-backup-deletes",
         "rules": ["no-backup-deletes"], "policy_version": "sha256:0123", "explanation": []},
        {"at": (at - timedelta(seconds=10)).isoformat(), "call_id": "5", "tool": "issue_refund",
         "outcome": "require_approval", "winner": None, "rules": [],
         "policy_version": "sha256:0123", "explanation": []},
    ]
    return data, at


def policy_app(**kwargs: Any) -> tuple[IrqApp, PolicyFleet, datetime]:
    data, at = policy_data()
    source = PolicyFleet(data)
    return IrqApp(source, context="demo", clock=lambda: at, ping_interval=0, **kwargs), \
        source, at


async def settled(pilot: Any) -> None:
    app = pilot.app
    await until(pilot, lambda: app.index.visible and app.status.state == "recorded",
                "the recorded fleet on screen", timeout=30)
    await pilot.pause(0.2)


async def open_obligations(pilot: Any) -> ObligationsScreen:
    app = pilot.app
    await settled(pilot)
    await pilot.press("o")
    await until(pilot, lambda: isinstance(app.screen, ObligationsScreen), "obligations screen")
    await pilot.pause(0.2)
    screen = app.screen
    assert isinstance(screen, ObligationsScreen)
    return screen


async def test_obligations_screen_orders_the_snapshot_and_follows_obligation_events():
    app, source, at = policy_app()
    run_ids = list(source.data["runs"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_obligations(pilot)
        overdue, soon, later, done = (f"{run_ids[2]}#2/phi-notify-ciso",
                                      f"{run_ids[1]}#3/phi-notify-ciso",
                                      f"{run_ids[0]}#7/phi-notify-ciso",
                                      f"{run_ids[0]}#1/phi-notify-ciso")
        assert screen._shown == [overdue, soon, later, done]  # noqa: SLF001
        text = screen_text(app)
        assert "overdue by 3m" in text and "in 2m" in text and "in 10m" in text
        assert "Obligations: 3 open, 1 overdue" in text
        assert "fulfilled" in text and "alice" in text
        assert "overdue 1" in str(app.screen.query_one(StatusHeader).render())
        assert "tell legal" in text  # the selected (first) one's detail pane

        # the gateway's scanner flips the CISO one overdue; a new one arrives, already late
        new = obligation(f"{run_ids[3]}#1/export-log", run_ids[3], "log the export", at, -60,
                         state="overdue", rule="export-log")
        flipped = obligation(later, run_ids[0], "notify the CISO", at, -30, state="overdue")
        source.push({"kind": "obligation", "data": new}, {"kind": "obligation", "data": flipped})
        await until(pilot, lambda: len(screen._shown) == 5, "the new obligation listed")  # noqa: SLF001
        assert screen._shown[:4] == [overdue, new["id"], later, soon]  # noqa: SLF001
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "Obligations: 4 open, 3 overdue" in text
        assert "overdue by 1m" in text or "overdue by 60s" in text
        assert "overdue by 30s" in text


async def test_fulfil_sends_the_note_after_confirm_and_waive_needs_a_note():
    app, source, _at = policy_app()
    run_ids = list(source.data["runs"])
    overdue = f"{run_ids[2]}#2/phi-notify-ciso"
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_obligations(pilot)
        assert screen.selected_obligation() is not None
        assert screen.selected_obligation().id == overdue  # type: ignore[union-attr]
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.pause(0.2)
        dialog_text = screen_text(app)
        assert "Fulfil obligation?" in dialog_text and "tell legal" in dialog_text
        assert source.sent == [], "nothing is sent before the operator confirms"
        await type_text(pilot, "legal informed by mail")
        await pilot.press("tab")
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("tab")
        assert app.focused is not None and app.focused.id == "yes"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "the results")
        assert source.sent == [("obligation_fulfil", [overdue], "legal informed by mail")]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen and not app.mutation_pending,
                    "back on the obligations screen")

        # waive without a note: refused in the console, nothing sent
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the waive dialog")
        await pilot.press("enter", "tab")  # reason (empty) -> No -> Yes
        assert app.focused is not None and app.focused.id == "yes"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen and not app.mutation_pending,
                    "the refused waive")
        assert len(source.sent) == 1

        # escape on the dialog sends nothing either
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the waive dialog")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen and not app.mutation_pending, "No")
        assert len(source.sent) == 1

        # a closed obligation cannot be fulfilled: the key does nothing
        screen.table.move_cursor(row=3)
        await pilot.pause(0.1)
        assert screen.selected_obligation().state == "fulfilled"  # type: ignore[union-attr]
        await pilot.press("f")
        await pilot.pause(0.2)
        assert app.screen is screen and len(source.sent) == 1


async def test_inbox_item_shows_its_rule_why_approvals_and_role():
    """The item names its rule and why, the four-eyes count and the role it needs; an
    operator's decision keys are dimmed under an admin rule; an admin's approval is the
    gateway's ``recorded`` (1 of 2), shown as such."""
    app, source, _at = policy_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "the inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        target = next(i for i in app.view.pending_interrupts() if i.policy is not None)
        inbox.table.move_cursor(row=inbox._shown.index(target.id))  # noqa: SLF001
        await pilot.pause(0.3)
        head = str(inbox.query_one("#intr-head").render())
        assert "rule refund-large: refunds over 100 EUR need a human" in head
        assert "approvals 1/2: alice" in head
        assert "needs admin" in head
        assert app.source.role == "operator"
        assert inbox.check_action("approve", ()) is None  # dimmed: the rule needs admin
        await pilot.press("a")
        await pilot.pause(0.2)
        assert app.screen is inbox and source.sent == []
        source._role = "admin"  # noqa: SLF001 - the same console, signed in as an admin
        inbox.refresh_bindings()
        assert inbox.check_action("approve", ()) is True
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the approve dialog")
        await pilot.pause(0.2)
        assert "rule refund-large" in screen_text(app)
        await type_text(pilot, "looks right")
        await pilot.press("tab", "tab", "enter")
        await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "the results")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "0/1 applied, 1 recorded (needs another approver)" in text
        assert "recorded" in text and "approval 1 of 2 recorded by" in text
        assert source.sent == [("decide", [target.id], "looks right")]
        await pilot.press("escape")
        await until(pilot, lambda: not app.mutation_pending, "the results closed")


async def test_run_detail_lists_the_runs_policy_decisions():
    app, source, _at = policy_app()
    run_id = list(source.data["runs"])[0]
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        app.open_run(run_id)
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and bool(app.screen.policy_decisions), "run detail with its decisions")
        app.screen.query_one("#sec-policy").scroll_visible(animate=False, top=True)
        await pilot.pause(0.3)
        section = screen_text(app)
        assert "Policy decisions" in section
        for word in ("read_record", "permit", "phi-read", "delete_backup", "prohibit",
                     "no-backup-deletes", "issue_refund", "approval", "default"):
            assert word in section, word
        other = next(r for r in source.data["runs"] if r != run_id)
        app.open_run(other)
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen)
                    and app.screen.run_id == other, "a run without decisions")
        await pilot.pause(0.3)
        assert not app.screen.query_one("#sec-policy").display


async def test_obligations_key_is_in_help_and_the_screen_is_ascii_in_ascii_mode():
    app, _source, _at = policy_app(ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_obligations(pilot)
        assert not not_ascii(screen_text(app)), not_ascii(screen_text(app))
        assert "oblig" in screen_text(app)  # the footer
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the dialog")
        await pilot.pause(0.2)
        assert not not_ascii(screen_text(app)), not_ascii(screen_text(app))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen and not app.mutation_pending, "back")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "view_obligations" in text and "fulfil" in text and "waive" in text


HOSTILE = "A\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202eB"
FORBIDDEN = ("\x1b]", "\x1b[2J", "\x9b", "\x07", "\u202e")


def terminal_output(app: IrqApp) -> str:
    """What Textual writes for a full redraw of the current screen (line filters included)."""
    update = app.screen._compositor.render_update(  # noqa: SLF001
        full=True, screen_stack=app._background_screens  # noqa: SLF001
    )
    assert update is not None
    text: str = update.render_segments(app.console)  # type: ignore[attr-defined]
    return text


async def test_obligation_and_rule_text_from_policy_files_and_agents_is_inert():
    data, at = policy_data()
    first = data["snapshot"]["obligations"][2]  # the overdue one: selected first
    first.update(what=f"what {HOSTILE}", rule=f"rule {HOSTILE}", note=f"note {HOSTILE}",
                 by=f"by {HOSTILE}")
    intr = next(i for i in data["snapshot"]["interrupts"] if i.get("policy"))
    intr["policy"]["why"] = f"why {HOSTILE}"
    source = PolicyFleet(data)
    app = IrqApp(source, context="demo", clock=lambda: at, ping_interval=0)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_obligations(pilot)
        out = terminal_output(app)
        assert not [s for s in FORBIDDEN if s in out], "obligations screen"
        assert "what A\\x1b]0;PWNED" in out and "note A\\x1b]0;PWNED" in out
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the dialog")
        await pilot.pause(0.2)
        out = terminal_output(app)
        assert not [s for s in FORBIDDEN if s in out], "fulfil dialog"
        assert "what A\\x1b]0;PWNED" in out
        await pilot.press("escape")
        await until(pilot, lambda: not app.mutation_pending, "the dialog closed")
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "the inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        inbox.table.move_cursor(row=inbox._shown.index(intr["id"]))  # noqa: SLF001
        await pilot.pause(0.3)
        out = terminal_output(app)
        assert not [s for s in FORBIDDEN if s in out], "inbox"
        assert "why A\\x1b]0;PWNED" in out


def test_obligation_keys_have_ids_descriptions_and_portable_keys():
    from test_keys import PORTABLE, bindings

    for binding in bindings(ObligationsScreen, IrqApp):
        assert binding.id and binding.description, binding
        for key in binding.key.split(","):
            assert PORTABLE.match(key.strip()), key
    ids = {b.id for b in bindings(ObligationsScreen)}
    assert {"fulfil", "waive", "help", "filter", "command", "back"} <= ids
    assert "view_obligations" in {b.id for b in bindings(IrqApp)}
