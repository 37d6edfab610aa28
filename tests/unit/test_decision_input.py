"""The suggested next command names what a decision needs: a respond to a native handler
that published a JSON Schema takes ``--json`` with the schema's required fields (``--text``
would send a string the schema refuses); other responds take text."""

from __future__ import annotations

from console.cli.decision_preview import decision_input

SCHEMA = {"type": "object", "required": ["approved", "approver"],
          "properties": {"approved": {"type": "boolean"}, "approver": {"type": "string"},
                         "comment": {"type": "string"}}}


def test_a_handler_with_a_schema_is_answered_with_json_naming_its_required_fields() -> None:
    signal = {"handlers": [{"name": "send_approval", "kind": "signal", "args_schema": SCHEMA}]}
    assert decision_input("respond", signal) == ' --json \'{"approved": ..., "approver": ...}\''


def test_without_a_schema_a_respond_takes_text_and_the_others_their_own_input() -> None:
    plain = {"handlers": [{"name": "send_approval", "kind": "signal", "args_schema": None}]}
    assert decision_input("respond", plain) == " --text TEXT"
    assert decision_input("respond", {"handlers": []}) == " --text TEXT"
    assert decision_input("respond", None) == " --text TEXT"
    assert decision_input("approve", {"handlers": [{"args_schema": SCHEMA}]}) == ""
    assert decision_input("reject", None) == " --feedback TEXT"
