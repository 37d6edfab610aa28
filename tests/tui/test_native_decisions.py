"""Deciding native waits and batched interrupts in the console: the confirm dialog hosts an
editor that picks the handler (when several answer a wait) and checks the payload against
its published schema, or takes one decision per call; each validates live with the one
decision check, so Yes sends only what the gateway accepts. Driven with Pilot at 80x24."""

from __future__ import annotations

import json

from textual.app import App
from textual.widgets import Button, Select, TextArea

from console.model import Decision, DecisionKind, Interrupt
from console.tui.decision_dialog import decision_editor, decision_from
from console.tui.widgets.confirm_dialog import ConfirmDialog, ConfirmOutcome
from console.tui.widgets.native_editors import NativeDecisionEditor, PerCallEditor, parse_calls

SCHEMA = {"type": "object", "required": ["approved"],
          "properties": {"approved": {"type": "boolean"}}}
WAIT = Interrupt.model_validate({
    "id": "temporal:dev/loan-7#wait-11", "run_id": "temporal:dev/loan-7", "native_id": "wait-11",
    "title": "loan-7 waits for a signal or update", "kind": "signal",
    "allowed_decisions": ["respond"], "wait_site": "after event #11 WorkflowTaskCompleted",
    "handlers": [{"name": "send_approval", "kind": "signal", "description": "the manager"},
                 {"name": "approve", "kind": "update", "args_schema": SCHEMA}]})
BATCH = Interrupt.model_validate({
    "id": "langgraph:dev/t-1#i-1", "run_id": "langgraph:dev/t-1", "native_id": "i-1",
    "title": "3 tool calls need review", "kind": "middleware",
    "allowed_decisions": ["approve", "edit", "reject"],
    "actions": [{"action": "write_file", "args": {"path": "a.txt"},
                 "allowed_decisions": ["approve", "edit", "reject"]},
                {"action": "send_email", "args": {"to": "x@example.com"},
                 "allowed_decisions": ["approve", "reject"]},
                {"action": "delete_file", "args": {"path": "b.txt"},
                 "allowed_decisions": ["approve", "reject"]}]})


class DialogApp(App[None]):
    def __init__(self, dialog: ConfirmDialog) -> None:
        super().__init__()
        self.dialog = dialog
        self.outcome: ConfirmOutcome | None = None

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self._done)

    def _done(self, outcome: ConfirmOutcome | None) -> None:
        self.outcome = outcome


def dialog_for(intr: Interrupt, kind: DecisionKind) -> ConfirmDialog:
    return ConfirmDialog(title="t", verb=kind.value, targets=[intr.id],
                         editor=decision_editor(intr, kind))


async def test_respond_to_a_wait_with_two_handlers_picks_one_and_checks_its_schema():
    dialog = dialog_for(WAIT, DecisionKind.RESPOND)
    app = DialogApp(dialog)
    async with app.run_test(size=(80, 24)) as pilot:
        editor = dialog.editor
        assert isinstance(editor, NativeDecisionEditor)
        area = editor.query_one(TextArea)
        area.text = '{"approved": "yes"}'
        await pilot.pause()
        assert editor.error is not None and "several handlers" in editor.error
        editor.query_one(Select).value = "approve"
        await pilot.pause()
        assert editor.error is not None and editor.error.startswith("payload.approved")
        assert dialog.query_one("#yes", Button).disabled
        area.text = '{"approved": true}'
        await pilot.pause()
        assert editor.error is None
        dialog.query_one("#yes", Button).press()
        await pilot.pause()
    assert app.outcome is not None
    decision = decision_from(DecisionKind.RESPOND, editor, app.outcome.value)
    assert decision == Decision(kind=DecisionKind.RESPOND, response={"approved": True},
                                handler="approve")


async def test_a_batched_interrupt_is_decided_call_by_call():
    dialog = dialog_for(BATCH, DecisionKind.APPROVE)
    app = DialogApp(dialog)
    async with app.run_test(size=(80, 24)) as pilot:
        editor = dialog.editor
        assert isinstance(editor, PerCallEditor)
        rows = json.loads(editor.query_one(TextArea).text)
        assert [(r["call"], r["decision"]) for r in rows] == [
            ("write_file", "approve"), ("send_email", "approve"), ("delete_file", "approve")]
        rows[0] = {"call": "write_file", "decision": "edit", "args": {"path": "c.txt"}}
        rows[2] = {"call": "delete_file", "decision": "edit", "args": {"path": "d.txt"}}
        editor.query_one(TextArea).text = json.dumps(rows)
        await pilot.pause()
        assert editor.error is not None and editor.error.startswith("decisions[2].decision")
        rows[2] = {"call": "delete_file", "decision": "reject", "feedback": "keep it"}
        editor.query_one(TextArea).text = json.dumps(rows)
        await pilot.pause()
        assert editor.error is None
        dialog.query_one("#yes", Button).press()
        await pilot.pause()
    assert app.outcome is not None
    decision = decision_from(DecisionKind.APPROVE, editor, app.outcome.value)
    assert decision.kind is DecisionKind.EDIT
    assert [(d.kind.value, d.args, d.feedback) for d in decision.decisions or []] == [
        ("edit", {"path": "c.txt"}, None), ("approve", None, None), ("reject", None, "keep it")]


def test_the_per_call_list_refuses_a_shape_it_cannot_read():
    assert parse_calls("{}")[1] == "a JSON list with one object per call"
    assert parse_calls('[{"decision": "maybe"}]')[1] == (
        "call 1: decision is approve, edit, reject or respond")


APPROVAL = {"type": "object", "required": ["approved", "approver"],
            "properties": {"approved": {"type": "boolean"}, "approver": {"type": "string"},
                           "comment": {"type": "string"}}}
SIGNAL_WAIT = Interrupt.model_validate({
    "id": "temporal:dev/change-approval-0001#wait-11",
    "run_id": "temporal:dev/change-approval-0001", "native_id": "wait-11",
    "title": "change-approval waits for send_approval", "kind": "signal",
    "allowed_decisions": ["respond"],
    "handlers": [{"name": "send_approval", "kind": "signal", "args_schema": APPROVAL}]})


async def test_a_published_schema_gives_the_payload_to_fill_in_which_cannot_be_sent_as_is():
    dialog = dialog_for(SIGNAL_WAIT, DecisionKind.RESPOND)
    app = DialogApp(dialog)
    async with app.run_test(size=(80, 24)) as pilot:
        editor = dialog.editor
        assert isinstance(editor, NativeDecisionEditor)
        area = editor.query_one(TextArea)
        assert json.loads(area.text) == {"approved": None, "approver": None}
        assert "optional: comment" in editor.label
        await pilot.pause()
        assert editor.error is not None and " is not of type " in editor.error
        assert dialog.query_one("#yes", Button).disabled  # the template itself: not sendable
        area.text = '{"approved": true, "approver": "alice"}'
        await pilot.pause()
        assert editor.error is None and not dialog.query_one("#yes", Button).disabled


async def test_choosing_a_handler_refills_an_untouched_payload_with_its_schema():
    dialog = dialog_for(WAIT, DecisionKind.RESPOND)
    app = DialogApp(dialog)
    async with app.run_test(size=(80, 24)) as pilot:
        editor = dialog.editor
        assert isinstance(editor, NativeDecisionEditor)
        area = editor.query_one(TextArea)
        assert area.text == ""  # two handlers, none chosen: nothing to fill in yet
        editor.query_one(Select).value = "approve"
        await pilot.pause()
        assert json.loads(area.text) == {"approved": None}
        editor.query_one(Select).value = "send_approval"  # no schema: the template goes
        await pilot.pause()
        assert area.text == ""
        area.text = '"yes"'
        editor.query_one(Select).value = "approve"  # typed by the operator: kept
        await pilot.pause()
        assert area.text == '"yes"'
