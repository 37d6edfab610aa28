"""One check of a decision against the interrupt it answers.

Is the decision's kind among the interrupt's allowed decisions, and do edited arguments fit
the interrupt's ``args_schema``? Every place that asks calls :func:`decision_problem`: the
gateway before it delivers, the TUI's argument editor live as the operator types, the DBOS
and Temporal adapters before they send, and irq's Temporal workflow helper in its update
validator. So they all follow one JSON Schema policy:

- the draft is the one the schema names in ``$schema``; 2020-12 when it names none; an
  unknown ``$schema`` is a problem, not a silent fallback;
- the schema itself is checked first: a broken schema refuses every edit (it never waves
  edited arguments through);
- ``format`` is asserted (a FormatChecker): ``{"format": "email"}`` rejects ``"x"``.

A problem names where it is: ``args.to[0]`` in the edited arguments, ``args_schema...`` in
the schema, ``decision`` for the kind. Pure: no I/O, no clock (it runs in workflow sandboxes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, exceptions, validators
from jsonschema.protocols import Validator

from console.model import Decision, DecisionKind, Interrupt

#: the draft of a schema that does not name one in ``$schema``
DEFAULT_DRAFT: type[Validator] = Draft202012Validator

#: validator_for's answer for a ``$schema`` it does not know (never used to validate)
_NO_DRAFT: type[Validator] = type("NoDraft", (), {})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class DecisionProblem:
    """Why a decision cannot be delivered: where (``path``) and what (``message``)."""

    path: str  # "decision", "args", "args.to[0]", "args_schema.properties.to.type"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def json_path(root: str, parts: Iterable[str | int]) -> str:
    """``root`` followed by ``.key`` / ``[index]`` for each part (``["odd key"]`` if needed)."""
    out = root
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


def _draft_of(schema: Mapping[str, Any]) -> type[Validator] | DecisionProblem:
    if "$schema" not in schema:
        return DEFAULT_DRAFT
    declared = schema["$schema"]
    found: type[Validator] | None = None
    if isinstance(declared, str):
        found = validators.validator_for({"$schema": declared}, default=_NO_DRAFT)
    if found is None or found is _NO_DRAFT:
        return DecisionProblem("args_schema.$schema", f"unknown JSON Schema draft {declared!r}")
    return found


def schema_validator(schema: object) -> Validator | DecisionProblem:
    """A validator for ``schema`` under the one draft policy, or what is wrong with it."""
    if not isinstance(schema, Mapping):
        return DecisionProblem("args_schema", "must be a JSON object (a JSON Schema)")
    cls = _draft_of(schema)
    if isinstance(cls, DecisionProblem):
        return cls
    schema = dict(schema)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as exc:
        return DecisionProblem(
            json_path("args_schema", exc.absolute_path),
            f"the interrupt's argument schema is invalid: {exc.message}",
        )
    validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return validator


def schema_problem(schema: object) -> DecisionProblem | None:
    """What is wrong with an interrupt's ``args_schema`` (None: usable). For agents that
    raise interrupts: refuse a broken schema when it is raised, not when it is answered."""
    checked = schema_validator(schema)
    return checked if isinstance(checked, DecisionProblem) else None


def args_problem(args: object, schema: object | None) -> DecisionProblem | None:
    """What is wrong with edited arguments: not an object, or not valid against ``schema``."""
    if not isinstance(args, Mapping):
        return DecisionProblem("args", "edited arguments must be a JSON object")
    if schema is None:
        return None
    checked = schema_validator(schema)
    if isinstance(checked, DecisionProblem):
        return checked
    error = exceptions.best_match(checked.iter_errors(args))
    if error is None:
        return None
    return DecisionProblem(json_path("args", error.absolute_path), error.message)


def kind_problem(kind: str, allowed: Sequence[str]) -> DecisionProblem | None:
    """The first half of :func:`decision_problem`: is ``kind`` among ``allowed``? (The CLI
    asks this before it shows a decision for confirmation; the arguments are the gateway's
    to judge when it is sent.)"""
    names = [str(a) for a in allowed]
    if str(kind) not in names:
        return DecisionProblem(
            "decision",
            f"{kind} is not allowed here (allowed: {', '.join(names) or 'none'})",
        )
    return None


def decision_problem(
    kind: str,
    allowed: Sequence[str],
    *,
    args: object = None,
    schema: object | None = None,
) -> DecisionProblem | None:
    """THE decision check: is ``kind`` allowed, and (for an edit) do ``args`` fit ``schema``?

    ``kind`` and ``allowed`` are decision kinds (``DecisionKind`` members or their values).
    Returns None when the decision may be delivered.
    """
    refused = kind_problem(kind, allowed)
    if refused is not None:
        return refused
    if str(kind) == DecisionKind.EDIT.value:
        if args is None:
            return DecisionProblem("args", "edit needs the edited arguments (a JSON object)")
        return args_problem(args, schema or None)
    return None


def check_decision(interrupt: Interrupt, decision: Decision) -> DecisionProblem | None:
    """:func:`decision_problem` for the console's own model objects, and what an operator
    must give with a reject (feedback for the agent) or a respond (the response). The gateway
    asks it once per decision, before the intent is journaled.

    Native waits add two things: which handler answers (``decision.handler``: one of the
    interrupt's handlers; required when there are several) with the payload validated against
    that handler's published schema, and, for a batched interrupt (``interrupt.actions``), one
    decision per action request, in order, each checked like a decision of its own."""
    if interrupt.actions:
        return calls_problem(interrupt, decision)
    problem = _single_problem(
        decision, [d.value for d in interrupt.allowed_decisions], interrupt.args_schema)
    return problem or handler_problem(interrupt, decision)


def _single_problem(decision: Decision, allowed: Sequence[str],
                    schema: object | None, where: str = "") -> DecisionProblem | None:
    problem = decision_problem(decision.kind.value, allowed, args=decision.args, schema=schema)
    if problem is None and decision.kind is DecisionKind.REJECT:
        if not (decision.feedback or "").strip():
            problem = DecisionProblem("feedback", "reject needs feedback text for the agent")
    if problem is None and decision.kind is DecisionKind.RESPOND:
        if decision.response in (None, ""):
            problem = DecisionProblem("response", "respond needs a response")
    if problem is not None and where:
        return DecisionProblem(f"{where}.{problem.path}", problem.message)
    return problem


def calls_problem(interrupt: Interrupt, decision: Decision) -> DecisionProblem | None:
    """A batched interrupt: exactly one decision per action request, each allowed for its
    call (a single decision is refused: say what becomes of every call)."""
    calls = decision.decisions
    n = len(interrupt.actions)
    if not calls or len(calls) != n:
        got = len(calls) if calls else "no per-call decisions"
        return DecisionProblem(
            "decisions", f"this interrupt asks about {n} calls: give one decision per call, "
            f"in order (got {got})")
    for i, (call, request) in enumerate(zip(calls, interrupt.actions, strict=True)):
        if call.decisions:
            return DecisionProblem(f"decisions[{i}]", "a per-call decision cannot nest others")
        problem = _single_problem(
            call, [d.value for d in request.allowed_decisions], None, f"decisions[{i}]")
        if problem is not None:
            return problem
    return None


def handler_problem(interrupt: Interrupt, decision: Decision) -> DecisionProblem | None:
    """Which of a native wait's handlers answers, and does the payload fit its schema?"""
    handlers = [h for h in interrupt.handlers if h.kind != "topic"]
    if decision.handler is None:
        if len(handlers) > 1:
            names = ", ".join(h.name for h in handlers)
            return DecisionProblem(
                "handler", f"several handlers answer this wait: name one ({names})")
        chosen = handlers[0] if handlers else None
    else:
        chosen = next((h for h in handlers if h.name == decision.handler), None)
        if chosen is None:
            names = ", ".join(h.name for h in handlers) or "none"
            return DecisionProblem(
                "handler", f"{decision.handler!r} does not answer this wait (handlers: {names})")
    if chosen is None or chosen.args_schema is None:
        return None
    payload = native_payload(decision)
    checked = schema_validator(chosen.args_schema)
    if isinstance(checked, DecisionProblem):
        return DecisionProblem(f"handlers.{chosen.name}.{checked.path}", checked.message)
    error = exceptions.best_match(checked.iter_errors(payload))
    if error is None:
        return None
    return DecisionProblem(json_path("payload", error.absolute_path), error.message)


def native_payload(decision: Decision) -> Any:
    """What a native handler receives: a respond's response as it is (the operator wrote
    the handler's argument), an edit's arguments, else the common decision payload."""
    if decision.kind is DecisionKind.RESPOND:
        return decision.response
    if decision.kind is DecisionKind.EDIT:
        return decision.args or {}
    return decision.payload()
