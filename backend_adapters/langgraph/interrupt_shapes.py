"""The interrupt values LangGraph graphs raise, mapped onto irq's ``Interrupt`` and back (pure).

Three shapes are recognised (``docs/backends/langgraph.md`` §4, §6a); anything else is a
plain value, answered only with ``respond``:

- **Agent Inbox** ``HumanInterrupt`` (``action_request``, ``config.allow_*``,
  ``description``), raised alone or as a list of one. Resumed with a list of one
  ``{"type": "accept|edit|response|ignore", "args"}``.
- **HumanInTheLoopMiddleware** ``{"action_requests", "review_configs"}`` (batched mode: all
  the tool calls of one model turn in one interrupt; kind ``middleware``). Resumed with
  ``{"decisions": [...]}``, one per action, in order. One call is decided like any item (one
  decision). Several calls fill ``Interrupt.actions`` (one ``ActionRequest`` per call, with
  the decisions its review config allows) and **need one decision per call**
  (``Decision.decisions``, in order: approve one, edit a second, reject a third); the run
  resumes once with all of them. A single decision for several calls is refused: the
  middleware never sees a partial or guessed list.
- **Per-call tool approval** ``{"type": "tool_approval", "name", "args", ...}`` (the
  middleware's ``interrupt_mode="per_call"``): resumed with one decision.

The mapping table (irq decision -> what the graph receives):

========  ==========================================  =========================================
irq       Agent Inbox (list of one; offered per flag)  middleware (one per call; per
                                                       ``allowed_decisions``)
========  ==========================================  =========================================
approve   ``{"type":"accept","args":null}``            ``{"type":"approve"}``
edit      ``{"type":"edit","args":{"action","args"}}``  ``{"type":"edit","edited_action":{...}}``
          (unchanged args: ``accept``)                 (unchanged args: ``approve``)
reject    ``{"type":"response","args":feedback}``       ``{"type":"reject","message":feedback}``
          (no feedback or no ``allow_respond``:
          ``{"type":"ignore","args":null}``)
respond   ``{"type":"response","args":answer}``         ``{"type":"respond","message":answer}``
========  ==========================================  =========================================

The interrupt's own ``allowed_decisions`` for several calls is the union of the calls' (what
some call allows; ``approve`` too when a call allows ``respond``, the kind ``irq decide
--call`` gives a decision that answers one), so the kind of the decision as a whole passes;
each call is then checked against its own list.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from backend_adapters.base import InvalidInput
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.interrupt_deadline import deadline_at_of
from backend_adapters.langgraph.conventions import KEY_ARGS_SCHEMA
from console.decision_check import args_problem, check_decision
from console.model import (
    ActionRequest,
    Decision,
    DecisionKind,
    Interrupt,
    InterruptKind,
    InterruptPolicy,
)

Shape = Literal["agent_inbox", "hitl_request", "tool_approval", "value"]

ALL_DECISIONS = tuple(DecisionKind)
_ORDER = {kind: i for i, kind in enumerate(ALL_DECISIONS)}


#: the node langchain's create_agent runs HumanInTheLoopMiddleware's batched review in
MIDDLEWARE_NODE = "HumanInTheLoopMiddleware.after_model"


class ShapeError(ValueError):
    """A decision the interrupt's shape cannot carry (refused before anything is sent)."""


def _inbox_request(value: Any) -> dict[str, Any] | None:
    """The ``HumanInterrupt`` in ``value`` (alone or a list of one), else None."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if (
        isinstance(value, dict)
        and isinstance(value.get("action_request"), dict)
        and isinstance(value.get("config"), dict)
    ):
        return value
    return None


def shape_of(value: Any) -> Shape:
    if _inbox_request(value) is not None:
        return "agent_inbox"
    if (
        isinstance(value, dict)
        and isinstance(value.get("action_requests"), list)
        and value["action_requests"]
        and all(isinstance(a, dict) for a in value["action_requests"])
    ):
        return "hitl_request"
    if isinstance(value, dict) and value.get("type") == "tool_approval" and "name" in value:
        return "tool_approval"
    return "value"


def _sorted(kinds: set[DecisionKind]) -> list[DecisionKind]:
    return sorted(kinds, key=_ORDER.__getitem__)


def _schema(value: Any) -> dict[str, Any] | None:
    schema = value.get(KEY_ARGS_SCHEMA) if isinstance(value, dict) else None
    return schema if isinstance(schema, dict) else None


def _inbox_allowed(config: dict[str, Any]) -> list[DecisionKind]:
    kinds: set[DecisionKind] = set()
    if config.get("allow_accept"):
        kinds.add(DecisionKind.APPROVE)
    if config.get("allow_edit"):
        kinds.add(DecisionKind.EDIT)
    if config.get("allow_respond"):
        kinds.update({DecisionKind.RESPOND, DecisionKind.REJECT})
    if config.get("allow_ignore"):
        kinds.add(DecisionKind.REJECT)
    return _sorted(kinds)


def _call_configs(value: dict[str, Any]) -> list[dict[str, Any]]:
    """The review config of each action request, in order (matched by action name)."""
    configs = [c for c in value.get("review_configs") or [] if isinstance(c, dict)]
    by_name = {str(c.get("action_name")): c for c in configs}
    out: list[dict[str, Any]] = []
    for i, request in enumerate(value["action_requests"]):
        config = by_name.get(str(request.get("name")))
        if config is None and i < len(configs):
            config = configs[i]
        out.append(config or {})
    return out


def _call_allowed(config: dict[str, Any]) -> set[DecisionKind]:
    kinds: set[DecisionKind] = set()
    for kind in config.get("allowed_decisions") or []:
        try:
            kinds.add(DecisionKind(kind))
        except ValueError:
            continue
    return kinds


def _hitl_allowed(configs: list[dict[str, Any]]) -> list[DecisionKind]:
    """One call: what its review config allows. Several: the union of the calls' (each call
    is checked against its own list), with ``approve`` when some call allows ``respond``."""
    per_call = [_call_allowed(c) for c in configs]
    if len(per_call) == 1:
        return _sorted(per_call[0])
    union = set().union(*per_call)
    if DecisionKind.RESPOND in union:
        union.add(DecisionKind.APPROVE)
    return _sorted(union)


def _action_requests(
    value: dict[str, Any], configs: list[dict[str, Any]]
) -> list[ActionRequest]:
    out = []
    for request, config in zip(value["action_requests"], configs, strict=True):
        args = request.get("args")
        out.append(
            ActionRequest(
                action=str(request.get("name") or ""),
                args=args if isinstance(args, dict) else {},
                description=str(request.get("description") or ""),
                allowed_decisions=_sorted(_call_allowed(config)),
            )
        )
    return out


def _title(text: str, fallback: str) -> str:
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return (first or fallback)[:200]


def interrupt_from_value(
    value: Any, *, run_id: str, native_id: str, created_at: datetime, node: str = ""
) -> Interrupt:
    """One pending LangGraph interrupt as an irq ``Interrupt`` (one per interrupt id)."""
    # a helper's request names its rule and its deadline (the value, or its Agent Inbox
    # request); with both, the earliest deadline wins (Interrupt's validator)
    source = _inbox_request(value) or (value if isinstance(value, dict) else {})
    common: dict[str, Any] = {
        "id": Interrupt.make_id(run_id, native_id),
        "run_id": run_id,
        "native_id": native_id,
        "created_at": created_at,
        "policy": InterruptPolicy.from_payload(source.get("policy")),
        "deadline_at": deadline_at_of(source.get("deadline_at")),
    }
    shape = shape_of(value)
    if shape == "agent_inbox":
        request = _inbox_request(value)
        assert request is not None
        action = request["action_request"]
        args = action.get("args")
        description = str(request.get("description") or "")
        name = str(action.get("action") or "")
        return Interrupt(
            **common,
            title=_title(description, f"{name or node or 'action'}?"),
            description=description,
            action=name,
            args=args if isinstance(args, dict) else {},
            args_schema=_schema(request),
            allowed_decisions=_inbox_allowed(request["config"]),
        )
    if shape == "hitl_request":
        requests = value["action_requests"]
        configs = _call_configs(value)
        names = [str(r.get("name") or "") for r in requests]
        descriptions = [str(r.get("description") or "") for r in requests]
        site = node or MIDDLEWARE_NODE
        if len(requests) == 1:
            args = requests[0].get("args")
            schema = configs[0].get(KEY_ARGS_SCHEMA)
            return Interrupt(
                **common,
                kind=InterruptKind.MIDDLEWARE,
                wait_site=site,
                title=f"Run tool {names[0]}?",
                description=descriptions[0],
                action=names[0],
                args=args if isinstance(args, dict) else {},
                args_schema=schema if isinstance(schema, dict) else None,
                allowed_decisions=_hitl_allowed(configs),
            )
        return Interrupt(
            **common,
            kind=InterruptKind.MIDDLEWARE,
            wait_site=f"{site}: {len(requests)} tool calls in one interrupt",
            title=f"Run {len(requests)} tool calls: {', '.join(names)}?",
            description="\n\n".join(
                f"{i + 1}. {d or n}"
                for i, (n, d) in enumerate(zip(names, descriptions, strict=True))
            )
            + "\n\nDecide each call on its own, in order (approve, edit, reject or respond, "
            "as each call allows); the agent resumes once with all the decisions.",
            action=" + ".join(names),
            args={"calls": [{"name": r.get("name"), "args": r.get("args")} for r in requests]},
            args_schema=None,
            allowed_decisions=_hitl_allowed(configs),
            actions=_action_requests(value, configs),
        )
    if shape == "tool_approval":
        args = value.get("args")
        description = str(value.get("description") or "")
        return Interrupt(
            **common,
            kind=InterruptKind.MIDDLEWARE,
            wait_site=node or f"HumanInTheLoopMiddleware (per call): {value.get('name')}",
            title=f"Run tool {value.get('name')}?",
            description=description,
            action=str(value.get("name") or ""),
            args=args if isinstance(args, dict) else {},
            args_schema=_schema(value),
            allowed_decisions=list(ALL_DECISIONS),
        )
    question = value.get("question") if isinstance(value, dict) else value
    text = question if isinstance(question, str) else ""
    return Interrupt(
        **common,
        title=_title(text, f"{node or 'graph'} asks for input"),
        description=json.dumps(value, indent=2, default=str, ensure_ascii=False)[:4000],
        action="",
        args=value if isinstance(value, dict) else {"value": value},
        args_schema=None,
        allowed_decisions=[DecisionKind.RESPOND],
    )


def _text(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(answer, default=str)


def resume_value(value: Any, decision: Decision) -> Any:
    """The resume value that carries ``decision`` in the shape ``value`` expects.

    ShapeError when the shape cannot carry it (a kind it does not offer, edited arguments of
    the wrong form): nothing is sent then.
    """
    shape = shape_of(value)
    kind = decision.kind
    if shape == "agent_inbox":
        request = _inbox_request(value)
        assert request is not None
        config, action = request["config"], request["action_request"]
        if kind not in _inbox_allowed(config):
            raise ShapeError(f"{kind.value} is not offered by this interrupt's config")
        if kind is DecisionKind.EDIT:
            if decision.args == action.get("args") and config.get("allow_accept"):
                return [{"type": "accept", "args": None}]
            edited = {"action": action.get("action"), "args": decision.args or {}}
            return [{"type": "edit", "args": edited}]
        if kind is DecisionKind.APPROVE:
            return [{"type": "accept", "args": None}]
        if kind is DecisionKind.RESPOND:
            return [{"type": "response", "args": _text(decision.response)}]
        # reject: feedback goes back as a response when the graph takes one, else ignore
        if decision.feedback and config.get("allow_respond"):
            return [{"type": "response", "args": decision.feedback}]
        if config.get("allow_ignore"):
            return [{"type": "ignore", "args": None}]
        return [{"type": "response", "args": decision.feedback or ""}]
    if shape == "hitl_request":
        return _hitl_resume(value, decision)
    if shape == "tool_approval":
        if kind is DecisionKind.APPROVE:
            return {"type": "approve"}
        if kind is DecisionKind.EDIT:
            return {
                "type": "edit",
                "edited_action": {"name": value.get("name"), "args": decision.args or {}},
            }
        if kind is DecisionKind.REJECT:
            out: dict[str, Any] = {"type": "reject"}
            if decision.feedback:
                out["message"] = decision.feedback
            return out
        return {"type": "respond", "message": _text(decision.response)}
    if kind is not DecisionKind.RESPOND:
        raise ShapeError("this interrupt is not an approval request: answer it with respond")
    return decision.response


def _hitl_resume(value: dict[str, Any], decision: Decision) -> dict[str, Any]:
    """``{"decisions": [...]}``: one per action request, in order. One call takes a single
    decision (or a list of one); several take exactly one decision per call."""
    requests = value["action_requests"]
    configs = _call_configs(value)
    calls = decision.decisions
    if calls is None:
        if len(requests) != 1:
            raise ShapeError(
                f"this interrupt asks about {len(requests)} calls: give one decision per "
                "call, in order"
            )
        calls = [decision]
    if len(calls) != len(requests):
        raise ShapeError(
            f"{len(calls)} decision(s) for {len(requests)} call(s): give one per call, in order"
        )
    return {
        "decisions": [
            _call_resume(request, config, call, i)
            for i, (request, config, call) in enumerate(
                zip(requests, configs, calls, strict=True)
            )
        ]
    }


def _call_resume(
    request: dict[str, Any], config: dict[str, Any], call: Decision, index: int
) -> dict[str, Any]:
    """The middleware's decision for one call: ``approve``, ``edit`` with ``edited_action``
    (unchanged arguments: ``approve``), ``reject`` with ``message``, ``respond``."""
    name = request.get("name")
    allowed = _call_allowed(config)
    if call.kind not in allowed:
        names = ", ".join(k.value for k in _sorted(allowed)) or "none"
        raise ShapeError(
            f"call {index + 1} ({name}): {call.kind.value} is not allowed (allowed: {names})"
        )
    if call.kind is DecisionKind.APPROVE:
        return {"type": "approve"}
    if call.kind is DecisionKind.EDIT:
        edited = call.args or {}
        if edited == request.get("args") and DecisionKind.APPROVE in allowed:
            return {"type": "approve"}
        problem = args_problem(edited, _schema(config))
        if problem is not None:
            raise ShapeError(f"call {index + 1} ({name}): {problem}")
        return {"type": "edit", "edited_action": {"name": name, "args": edited}}
    if call.kind is DecisionKind.REJECT:
        out: dict[str, Any] = {"type": "reject"}
        if call.feedback:
            out["message"] = call.feedback
        return out
    return {"type": "respond", "message": _text(call.response)}


def refuse_langgraph_decision(interrupt: Interrupt, decision: Decision, *, target: str) -> None:
    """The one decision check before anything is sent: a batched interrupt (``actions``) by
    ``check_decision`` (one allowed decision per call), any other by ``refuse_decision``."""
    if interrupt.actions:
        problem = check_decision(interrupt, decision)
        if problem is not None:
            raise InvalidInput(f"decision refused: {problem}", target=target)
        return
    refuse_decision(interrupt, decision, target=target)
