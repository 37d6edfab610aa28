"""The one decision check (console/decision_check.py) and the five places that call it.

Each caller used to carry its own copy with its own JSON Schema policy; the TUI let a broken
schema through that the gateway refused. These tests hold every caller to the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from backend_adapters.base import InvalidInput
from backend_adapters.dbos.decisions import refuse_invalid_decision
from backend_adapters.temporal.adapter import check_decision as temporal_check
from backend_adapters.temporal.agent import Interrupts
from console.decision_check import DecisionProblem, check_decision, decision_problem, schema_problem
from console.gateway.decision_commands import validation_error
from console.model import Decision, DecisionKind, Interrupt
from console.tui.widgets.value_editors import validate_args

MAIL = {
    "type": "object",
    "required": ["to"],
    "properties": {
        "to": {"type": "array", "items": {"type": "string", "format": "email"}},
        "amount": {"type": "number", "maximum": 5000},
    },
}
BROKEN = {"type": "object", "properties": {"to": {"type": "nonsense-type"}}}
EDIT_OK = ["approve", "edit"]


def interrupt(schema: dict[str, Any] | None, allowed: list[str] | None = None) -> Interrupt:
    return Interrupt(
        id="dbos:local/wf#i1",
        run_id="dbos:local/wf",
        native_id="i1",
        title="send mail",
        args={"to": ["ops@example.com"]},
        args_schema=schema,
        allowed_decisions=[DecisionKind(a) for a in (allowed or EDIT_OK)],
    )


# --------------------------------------------------------------------- the function itself


def test_format_is_checked_and_the_path_is_named() -> None:
    problem = decision_problem("edit", EDIT_OK, args={"to": ["x"]}, schema=MAIL)
    assert problem == DecisionProblem("args.to[0]", "'x' is not a 'email'")
    assert str(problem) == "args.to[0]: 'x' is not a 'email'"
    assert decision_problem("edit", EDIT_OK, args={"to": ["a@example.com"]}, schema=MAIL) is None
    nested = decision_problem("edit", EDIT_OK, args={"to": [], "amount": 9999}, schema=MAIL)
    assert nested is not None and nested.path == "args.amount"


def test_a_disallowed_kind_is_refused_whatever_the_args() -> None:
    problem = decision_problem(DecisionKind.RESPOND, [DecisionKind.APPROVE, DecisionKind.EDIT])
    assert problem == DecisionProblem(
        "decision", "respond is not allowed here (allowed: approve, edit)"
    )
    refused = decision_problem("edit", ["approve"], args={"to": ["a@example.com"]}, schema=MAIL)
    assert refused is not None and refused.path == "decision"


def test_an_edit_needs_an_object() -> None:
    assert decision_problem("edit", EDIT_OK, args=None) == DecisionProblem(
        "args", "edit needs the edited arguments (a JSON object)"
    )
    assert decision_problem("edit", EDIT_OK, args=[1]) == DecisionProblem(
        "args", "edited arguments must be a JSON object"
    )


def test_a_broken_schema_refuses_the_edit_and_says_where() -> None:
    problem = decision_problem("edit", EDIT_OK, args={"to": "x"}, schema=BROKEN)
    assert problem is not None
    assert problem.path == "args_schema.properties.to.type"
    assert "schema is invalid" in problem.message
    assert schema_problem(BROKEN) == problem
    assert schema_problem(MAIL) is None


def test_the_draft_is_the_schemas_own_default_2020_12() -> None:
    # 2020-12 (no $schema): prefixItems constrains the first item
    modern = {"type": "array", "prefixItems": [{"type": "string"}]}
    tuple_2020 = {"properties": {"a": modern}}
    bad = decision_problem("edit", ["edit"], args={"a": [1]}, schema=tuple_2020)
    assert bad is not None and bad.path == "args.a[0]"
    # draft-07 names itself: its tuple form "items": [..] applies, prefixItems means nothing
    old = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"a": {"type": "array", "items": [{"type": "string"}]}},
    }
    bad_07 = decision_problem("edit", ["edit"], args={"a": [1]}, schema=old)
    assert bad_07 is not None and bad_07.path == "args.a[0]"
    ignored = {**old, "properties": {"a": {"prefixItems": [{"type": "string"}]}}}
    assert decision_problem("edit", ["edit"], args={"a": [1]}, schema=ignored) is None
    unknown = {"$schema": "https://example.com/my-draft", "type": "object"}
    refused = decision_problem("edit", ["edit"], args={}, schema=unknown)
    assert refused is not None and refused.path == "args_schema.$schema"


# ----------------------------------------------------------------- every caller agrees


def _gateway(schema: dict[str, Any], args: Any, allowed: list[str]) -> str | None:
    return validation_error(interrupt(schema, allowed), Decision(kind=DecisionKind.EDIT, args=args))


def _tui(schema: dict[str, Any], args: Any, allowed: list[str]) -> str | None:
    import json

    return validate_args(json.dumps(args), schema, [DecisionKind(a) for a in allowed])[1]


def _dbos(schema: dict[str, Any], args: Any, allowed: list[str]) -> str | None:
    try:
        refuse_invalid_decision("edit", allowed, args=args, schema=schema)
    except InvalidInput as exc:
        return exc.message
    return None


def _temporal(schema: dict[str, Any], args: Any, allowed: list[str]) -> str | None:
    try:
        temporal_check(interrupt(schema, allowed), Decision(kind=DecisionKind.EDIT, args=args))
    except InvalidInput as exc:
        return exc.message
    return None


def _temporal_workflow(schema: dict[str, Any], args: Any, allowed: list[str]) -> str | None:
    """The update validator of irq's workflow helper (its state set up without a workflow)."""
    from temporalio.exceptions import ApplicationError

    helper = object.__new__(Interrupts)
    helper._pending = {"i1": {"allowed_decisions": allowed, "args_schema": schema}}
    try:
        helper._validate({"interrupt_id": "i1", "decision": {"type": "edit", "args": args}})
    except ApplicationError as exc:
        return exc.message
    return None


CALLERS: dict[str, Callable[[dict[str, Any], Any, list[str]], str | None]] = {
    "gateway": _gateway,
    "tui": _tui,
    "dbos": _dbos,
    "temporal adapter": _temporal,
    "temporal workflow helper": _temporal_workflow,
}


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize(
    ("schema", "args", "allowed", "expected"),
    [
        (MAIL, {"to": ["a@example.com"]}, EDIT_OK, None),
        (MAIL, {"to": ["x"]}, EDIT_OK, "args.to[0]: 'x' is not a 'email'"),
        (BROKEN, {"to": "x"}, EDIT_OK, "args_schema.properties.to.type: "),
        (MAIL, {"to": ["a@example.com"]}, ["approve"], "decision: edit is not allowed here"),
    ],
    ids=["valid", "format", "broken-schema", "kind-not-allowed"],
)
def test_every_caller_gives_the_same_answer(
    caller: str, schema: dict[str, Any], args: Any, allowed: list[str], expected: str | None
) -> None:
    answer = CALLERS[caller](schema, args, allowed)
    if expected is None:
        assert answer is None
    else:
        assert answer is not None and expected in answer, answer


# ------------------------------------------------------------------ native waits


def _native(**kw) -> Interrupt:
    from console.model import InterruptKind

    base = dict(id="temporal:dev/wf#wait", run_id="temporal:dev/wf", native_id="wait",
                title="waiting", kind=InterruptKind.SIGNAL,
                allowed_decisions=[DecisionKind.RESPOND])
    return Interrupt.model_validate({**base, **kw})


def test_a_wait_answered_by_several_handlers_needs_one_named():
    intr = _native(handlers=[{"name": "send_approval", "kind": "signal"},
                             {"name": "approve", "kind": "update"}])
    unnamed = check_decision(intr, Decision(kind=DecisionKind.RESPOND, response={"ok": True}))
    assert unnamed is not None and unnamed.path == "handler"
    assert "send_approval, approve" in unnamed.message
    unknown = check_decision(intr, Decision(kind=DecisionKind.RESPOND, response=1, handler="x"))
    assert unknown is not None and "'x' does not answer" in unknown.message
    named = Decision(kind=DecisionKind.RESPOND, response={"ok": True}, handler="approve")
    assert check_decision(intr, named) is None


def test_a_payload_is_checked_against_the_handlers_published_schema():
    schema = {"type": "object", "required": ["approved"],
              "properties": {"approved": {"type": "boolean"}}}
    intr = _native(handlers=[{"name": "send_approval", "kind": "signal", "args_schema": schema}])
    bad = check_decision(intr, Decision(kind=DecisionKind.RESPOND, response={"approved": "y"}))
    assert bad is not None and bad.path == "payload.approved", bad
    good = Decision(kind=DecisionKind.RESPOND, response={"approved": True})
    assert check_decision(intr, good) is None


def test_a_batched_interrupt_takes_one_allowed_decision_per_call_in_order():
    from console.model import InterruptKind

    intr = _native(kind=InterruptKind.MIDDLEWARE, allowed_decisions=["approve", "edit", "reject"],
                   actions=[{"action": "write_file", "allowed_decisions": ["approve", "reject"]},
                            {"action": "send_email",
                             "allowed_decisions": ["approve", "edit", "reject"]}])
    one = Decision(kind=DecisionKind.APPROVE)
    assert (p := check_decision(intr, one)) is not None and p.path == "decisions"
    calls = [Decision(kind=DecisionKind.EDIT, args={"path": "x"}),
             Decision(kind=DecisionKind.APPROVE)]
    wrong = check_decision(intr, Decision(kind=DecisionKind.APPROVE, decisions=calls))
    assert wrong is not None and wrong.path == "decisions[0].decision", wrong
    silent = [Decision(kind=DecisionKind.APPROVE), Decision(kind=DecisionKind.REJECT)]
    no_text = check_decision(intr, Decision(kind=DecisionKind.APPROVE, decisions=silent))
    assert no_text is not None and no_text.path == "decisions[1].feedback"
    fine = [Decision(kind=DecisionKind.APPROVE),
            Decision(kind=DecisionKind.EDIT, args={"to": "a@example.com"})]
    assert check_decision(intr, Decision(kind=DecisionKind.APPROVE, decisions=fine)) is None
