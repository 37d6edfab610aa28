"""The console driven by keyboard (Pilot) against a real gateway and the real DBOS demo fleet,
at 80x24 and 160x48."""

from __future__ import annotations

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import Button
from tui_pilot import SIZES, filter_list, live_app, live_state, type_text, until

from backend_adapters.dbos.conventions import decision_topic
from console.model import DecisionKind, Interrupt, RunState
from console.tui.app import IrqApp
from console.tui.run_filter import haystack_of
from console.tui.screens.audit import AuditScreen
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.inbox import InboxScreen
from console.tui.screens.run_detail import RunDetailScreen
from console.tui.widgets.confirm_dialog import ConfirmDialog
from console.tui.widgets.results_dialog import ResultsDialog
from console.tui.widgets.value_editors import ArgsEditor
from devtools.dbos_record import decision_received
from devtools.live_fleet import LiveFleet

pytestmark = pytest.mark.slow


def pending(app: IrqApp, action: str, kind: DecisionKind | None = None) -> Interrupt | None:
    found = [i for i in app.view.pending_interrupts()
             if i.action == action and (kind is None or kind in i.allowed_decisions)]
    return found[0] if found else None


def running_with_resources(app: IrqApp, prefix: str) -> str | None:
    for run_id, row in app.index.rows.items():
        run = row.run
        if (row.state is RunState.RUNNING and run.native_id.startswith(prefix)
                and run.resources and (run.progress or 0) < 0.3):
            return run_id
    return None


async def select_interrupt(pilot: object, app: IrqApp, intr: Interrupt) -> InboxScreen:
    await pilot.press("2")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, InboxScreen), "the inbox")
    inbox = app.screen
    assert isinstance(inbox, InboxScreen)
    await filter_list(pilot, intr.run_id.split("/", 1)[1])
    await until(pilot, lambda: (s := inbox.selected_interrupt()) is not None and s.id == intr.id,
                f"{intr.id} selected in the inbox")
    return inbox


async def confirm_with_yes(pilot: object, app: IrqApp, reason: str) -> ResultsDialog:
    """Type the reason, Tab to No, Tab to Yes, Enter; wait for the per-item results."""
    await type_text(pilot, reason)
    await pilot.press("tab")  # type: ignore[attr-defined]
    assert app.focused is not None and app.focused.id == "no", "No comes before Yes"
    await pilot.press("tab")  # type: ignore[attr-defined]
    assert app.focused is not None and app.focused.id == "yes"
    await pilot.press("enter")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, ResultsDialog), "per-item results")
    results = app.screen
    assert isinstance(results, ResultsDialog)
    return results


async def decided(pilot: object, app: IrqApp, intr: Interrupt) -> None:
    await until(pilot, lambda: (i := app.view.interrupts.get(intr.id)) is None
                or i.status != "pending", f"{intr.id} no longer pending")


async def received_by_agent(fleet: LiveFleet, intr: Interrupt) -> dict:
    """The decision exactly as the DBOS agent received it: the message its workflow's recv
    step returned, read once the workflow has gone on past it; exactly one was ever sent."""
    wid = intr.run_id.split("/", 1)[1]
    message, record = await decision_received(fleet.db, wid, intr.native_id)
    assert len(record.sent_on(decision_topic(intr.native_id))) == 1, record.sent
    assert isinstance(message, dict)
    return message


class Notes:
    """Records what the app tells the operator (notify), to wait for it."""

    def __init__(self, app: IrqApp) -> None:
        self.messages: list[str] = []
        notify = app.notify

        def recording(message: str, *args: object, **kwargs: object) -> None:
            self.messages.append(message)
            notify(message, *args, **kwargs)  # type: ignore[arg-type]

        app.notify = recording  # type: ignore[method-assign]


@pytest.mark.parametrize("size", SIZES)
async def test_views_navigate_and_fleet_filters_by_state_backend_and_text(live_fleet, size):
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(app.index.visible) >= 10, "runs in the fleet")
        # the index is synced by the flush timer straight from the client's view, while the
        # status arrives as a message: on a busy machine the rows can be drawn first
        await until(pilot, lambda: app.status.state == "live", "the header to say live")
        assert app.source.role == "operator"
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        await until(pilot, lambda: app.index.counts.get(RunState.WAITING), "a waiting run")

        await filter_list(pilot, "state:waiting")
        assert app.index.visible
        assert {app.index.rows[r].state for r in app.index.visible} == {RunState.WAITING}
        await filter_list(pilot, "backend:dbos research")
        assert app.index.visible
        # free text searches id, name, native state and the step in flight
        assert all("research" in haystack_of(app.index.rows[r].run) for r in app.index.visible)
        assert all(r.startswith("dbos:") for r in app.index.visible)
        await pilot.press("escape")
        assert app.index.query.empty and len(app.index.visible) == len(app.index)

        # sorted by id, rows move only when a run appears (the fleet starts new ones): retry then
        await pilot.press("colon")
        await type_text(pilot, "sort id")
        await pilot.press("enter")
        for _attempt in range(5):
            runs_before = len(app.index)
            await pilot.press("home", "j", "j", "k")
            selected = fleet.table.selected_id
            if len(app.index) == runs_before:
                break
        assert fleet.table.cursor == 1 and selected == app.index.visible[1]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), "run detail")
        detail = app.screen
        assert isinstance(detail, RunDetailScreen) and detail.run_id == selected
        await until(pilot, lambda: detail.journal, "journal steps from query('run')")
        assert {s.status for s in detail.journal} <= {"completed", "in_flight", "failed"}
        await pilot.press("escape")
        assert app.screen is fleet

        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        await until(pilot, lambda: inbox.selected_interrupt() is not None, "an interrupt")
        ages = [i.created_at for i in app.view.pending_interrupts()]
        assert ages == sorted(ages), "inbox is oldest first"
        await pilot.press("3")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen), "audit")
        await pilot.press("colon")
        await type_text(pilot, "runs state:running")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is fleet and not app.index.query.empty, ":runs")
        assert app.index.query.text == "state:running"
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.press("escape")
        assert app.screen is fleet


async def _pause_reasons(app, run_id: str) -> list[str]:
    """The reasons of every pause of ``run_id`` in the gateway's audit, oldest first."""
    audit = await app.source.query("audit", limit=500)
    pauses = [a for a in audit if a.get("action") == "pause" and a.get("target") == run_id]
    return [a["reason"] for a in sorted(pauses, key=lambda a: a["at"])]


@pytest.mark.parametrize("size", SIZES)
async def test_pause_shows_plan_defaults_to_no_then_pauses_and_resumes(live_fleet, size):
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: running_with_resources(app, "fine-tune"), "a GPU job")
        run_id = running_with_resources(app, "fine-tune")
        assert run_id
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        await filter_list(pilot, run_id.split("/", 1)[1])
        assert fleet.table.selected_id == run_id
        # the fleet is shared by both sizes: the other size may have paused this run already
        pauses_before = await _pause_reasons(app, run_id)

        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "confirm dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.plan is not None and dialog.plan.targets == [run_id]
        assert dialog.plan.resources_kept, "a GPU job keeps its GPU on pause"
        assert "gpu" in {r.kind for r in dialog.plan.resources_kept}
        # Enter, Enter: the reason field hands over to No, and No is what Enter means.
        await pilot.press("enter")
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is fleet and not app.mutation_pending,
                    "dialog closed")
        assert live_state(app, run_id) not in (RunState.PAUSED, RunState.PAUSING)
        # (that No sent nothing is checked below in the gateway's audit: one pause only)

        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "confirm dialog")
        results = await confirm_with_yes(pilot, app, "tui test: GPU needed elsewhere")
        assert [(r.target, r.outcome) for r in results.results] == [(run_id, "applied")], \
            results.results
        await pilot.press("enter")
        await until(pilot, lambda: live_state(app, run_id) is RunState.PAUSED, "run paused")
        # the audit holds every command sent before this one: No sent no pause
        pauses = await _pause_reasons(app, run_id)
        assert pauses == [*pauses_before, "tui test: GPU needed elsewhere"], pauses

        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "resume dialog")
        results = await confirm_with_yes(pilot, app, "tui test: GPU back")
        assert results.results[0].outcome == "applied"
        await pilot.press("enter")
        await until(pilot, lambda: live_state(app, run_id) not in (RunState.PAUSED, None),
                    "run resumed")


@pytest.mark.parametrize("size", SIZES)
async def test_approve_from_inbox_shows_arguments_and_decides(live_fleet, size):
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: pending(app, "drop_table") or pending(app, "deploy"),
                    "a drop_table or deploy interrupt")
        intr = pending(app, "drop_table") or pending(app, "deploy")
        assert intr is not None
        await select_interrupt(pilot, app, intr)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "approve dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog) and dialog.targets == [intr.id]
        results = await confirm_with_yes(pilot, app, "tui test: approved")
        assert [(r.target, r.outcome) for r in results.results] == [(intr.id, "applied")]
        await pilot.press("enter")
        await decided(pilot, app, intr)
        received = await received_by_agent(live_fleet, intr)
        assert received["type"] == "approve" and received["by"] == "tui-operator", received


@pytest.mark.parametrize("size", SIZES)
async def test_edit_blocks_invalid_arguments_then_sends_a_valid_edit(live_fleet, size):
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: pending(app, "issue_refund", DecisionKind.EDIT),
                    "a refund interrupt", timeout=90)
        intr = pending(app, "issue_refund", DecisionKind.EDIT)
        assert intr is not None
        await select_interrupt(pilot, app, intr)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "edit dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        editor = dialog.query_one(ArgsEditor)
        yes = dialog.query_one("#yes", Button)
        assert editor.error is None and not yes.disabled
        # line 2 is '  "amount": N,' (keys sorted): replace N by 9999 (over the schema maximum)
        amount = str(intr.args["amount"])
        await pilot.press("down", "end", "left", *["backspace"] * len(amount))
        await type_text(pilot, "9999")
        await until(pilot, lambda: editor.error is not None and yes.disabled, "the schema error")
        assert "amount" in editor.error
        assert "5000" in editor.error
        assert yes.disabled, "invalid arguments cannot be submitted"
        await pilot.press("tab", "tab", "tab")  # reason -> No -> (Yes is disabled: skipped)
        assert app.focused is not None and app.focused.id != "yes"
        # fix it: 100 is within the schema
        editor.text_area.focus()
        await pilot.press(*["backspace"] * 4)
        await type_text(pilot, "100")
        await until(pilot, lambda: editor.error is None and not yes.disabled, "a valid edit")
        assert editor.value == {**intr.args, "amount": 100}
        await pilot.press("tab")
        results = await confirm_with_yes(pilot, app, "tui test: partial refund")
        assert [(r.target, r.outcome) for r in results.results] == [(intr.id, "applied")]
        await pilot.press("enter")
        await decided(pilot, app, intr)
        # the agent got the edited arguments, every other argument as proposed
        received = await received_by_agent(live_fleet, intr)
        assert received["type"] == "edit", received
        assert received["args"] == {**intr.args, "amount": 100}, received


@pytest.mark.parametrize("size", SIZES)
async def test_reject_sends_feedback_text(live_fleet, size):
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: pending(app, "send_email", DecisionKind.REJECT),
                    "an email interrupt", timeout=90)
        intr = pending(app, "send_email", DecisionKind.REJECT)
        assert intr is not None
        await select_interrupt(pilot, app, intr)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "reject dialog")
        await type_text(pilot, "not before the contract is signed")
        await pilot.press("tab")
        assert app.focused is not None and app.focused.id == "reason"
        results = await confirm_with_yes(pilot, app, "tui test: rejected")
        assert [(r.target, r.outcome) for r in results.results] == [(intr.id, "applied")]
        await pilot.press("enter")
        await decided(pilot, app, intr)
        received = await received_by_agent(live_fleet, intr)
        assert received["type"] == "reject", received
        assert received["feedback"] == "not before the contract is signed", received


@pytest.mark.parametrize("size", SIZES)
async def test_respond_answers_in_the_tools_place(live_fleet, size):
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: pending(app, "ask_user", DecisionKind.RESPOND),
                    "a question for the user", timeout=90)
        intr = pending(app, "ask_user", DecisionKind.RESPOND)
        assert intr is not None
        await select_interrupt(pilot, app, intr)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "respond dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        yes = dialog.query_one("#yes", Button)
        assert yes.disabled, "an empty response cannot be sent"
        await type_text(pilot, "the DACH market first")
        await until(pilot, lambda: not yes.disabled, "Yes enabled by a response")
        await pilot.press("tab")
        results = await confirm_with_yes(pilot, app, "tui test: answered")
        assert [(r.target, r.outcome) for r in results.results] == [(intr.id, "applied")]
        await pilot.press("enter")
        await decided(pilot, app, intr)
        received = await received_by_agent(live_fleet, intr)
        assert received["type"] == "respond", received
        assert received["response"] == "the DACH market first", received


@pytest.mark.parametrize("size", SIZES)
async def test_viewer_sees_actions_dimmed_and_cannot_mutate(live_fleet, size):
    app = live_app(live_fleet, role="viewer")
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.source.role == "viewer" and app.index.visible,
                    "a viewer session with runs")
        await until(pilot, lambda: app.view.pending_interrupts(), "a pending interrupt")
        assert app.may_mutate() == (False, "your role is viewer")
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        bindings = fleet.active_bindings
        for key in ("p", "r", "c", "x"):
            assert bindings[key].enabled is False, f"{key} shown dimmed for a viewer"
        before = len(app.audit)
        notes = Notes(app)
        run_id = app.index.visible[0]
        # the dimmed keys, then a ':' command whose refusal the app says out loud: keys are
        # handled in order, so once it is said the keys before it have had their effect
        await pilot.press("p", "r", "c", "x", "colon")
        await type_text(pilot, f"pause {run_id}")
        await pilot.press("enter")
        await until(pilot, lambda: "pause: your role is viewer" in notes.messages,
                    "the refusal of :pause")
        assert app.screen is fleet and not app.mutation_pending, "no confirm dialog for a viewer"
        assert notes.messages == ["pause: your role is viewer"], notes.messages
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), "inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        await until(pilot, lambda: inbox.selected_interrupt() is not None, "interrupt selected")
        selected = inbox.selected_interrupt()
        assert selected is not None
        await pilot.press("a", "e", "n", "t", "colon")
        await type_text(pilot, f"approve {selected.id}")
        await pilot.press("enter")
        await until(pilot, lambda: "approve: your role is viewer" in notes.messages,
                    "the refusal of :approve")
        assert app.screen is inbox and not app.mutation_pending
        assert notes.messages[1:] == ["approve: your role is viewer"], notes.messages
        assert {b.enabled for b in inbox.active_bindings.values()
                if b.binding.action in ("approve", "edit", "reject", "respond")} == {False}
        audit = await app.source.query("audit", limit=500)
        assert not [a for a in audit if a.get("identity") == "tui-viewer"
                    and a.get("outcome") == "applied"]
        assert len(app.audit) == before


@pytest.mark.parametrize("size", SIZES)
async def test_every_action_is_reachable_by_keyboard_alone(live_fleet, size):
    """Single keys, ':' commands and the palette each open the action's dialog."""
    app = live_app(live_fleet)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: running_with_resources(app, ""), "a running run")
        await until(pilot, lambda: pending(app, "issue_refund") and pending(app, "ask_user"),
                    "refund and question interrupts", timeout=90)
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)

        async def opens_dialog(*keys: str) -> ConfirmDialog:
            await pilot.press(*keys)
            await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), f"{keys}")
            dialog = app.screen
            assert isinstance(dialog, ConfirmDialog)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmDialog)
                        and not app.mutation_pending, "closed")
            return dialog

        await until(pilot, lambda: running_with_resources(app, ""), "a running run")
        run_id = running_with_resources(app, "")  # no await since the wait: the same run
        assert run_id
        await filter_list(pilot, run_id.split("/", 1)[1])
        for key, verb in (("p", "pause"), ("r", "resume"), ("c", "cancel"), ("x", "terminate")):
            assert (await opens_dialog(key)).verb == verb
        await pilot.press("colon")
        await type_text(pilot, f"cancel {run_id}")
        dialog = await opens_dialog("enter")
        assert dialog.verb == "cancel" and dialog.targets == [run_id]

        refund = pending(app, "issue_refund")
        question = pending(app, "ask_user")
        assert refund and question
        await select_interrupt(pilot, app, refund)
        for key, verb in (("a", "approve"), ("e", "edit"), ("n", "reject")):
            assert (await opens_dialog(key)).verb == verb
        await select_interrupt(pilot, app, question)
        assert (await opens_dialog("t")).verb == "respond"
        await pilot.press("colon")
        await type_text(pilot, f"approve {refund.id}")
        assert (await opens_dialog("enter")).targets == [refund.id]

        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "command palette")
        await type_text(pilot, "go to audit")
        palette = app.screen
        assert isinstance(palette, CommandPalette)

        def offers_audit() -> bool:  # the palette searches in the background
            commands = palette.query_one(CommandList)
            index = commands.highlighted
            return index is not None and "audit" in str(
                commands.get_option_at_index(index).prompt).lower()

        await until(pilot, offers_audit, "the palette to offer the audit screen")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen), "audit via palette")
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), "fleet via 1")
