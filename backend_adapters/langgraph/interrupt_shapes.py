"""The interrupt values LangGraph graphs raise, mapped onto irq's ``Interrupt`` and back (pure).

Three shapes are recognised (``docs/backends/langgraph.md`` §4, §6a); anything else is a
plain value, answered only with ``respond``:

- **Agent Inbox** ``HumanInterrupt`` (``action_request``, ``config.allow_*``,
  ``description``), raised alone or as a list of one. Resumed with a list of one
  ``{"type": "accept|edit|response|ignore", "args"}``.
- **HumanInTheLoopMiddleware** ``{"action_requests", "review_configs"}`` (batched mode: all
  the tool calls of one model turn in one interrupt). Resumed with
  ``{"decisions": [...]}``, one per action, in order. irq decides such an interrupt **in one
  step**: one inbox item, one decision for every call (approve all, reject all with the
  feedback, respond to all), or an ``edit`` that carries each call's arguments
  (``{"calls": [{"name", "args"}, ...]}``): a call whose arguments are unchanged is sent as
  ``approve``, a changed one as ``edit``. The middleware never sees a partial list.
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
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from backend_adapters.langgraph.conventions import KEY_ARGS_SCHEMA
from console.model import Decision, DecisionKind, Interrupt, InterruptPolicy

Shape = Literal["agent_inbox", "hitl_request", "tool_approval", "value"]

ALL_DECISIONS = tuple(DecisionKind)
_ORDER = {kind: i for i, kind in enumerate(ALL_DECISIONS)}


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
    """One decision for every call: a kind every call allows; ``edit`` when some call allows
    it and every other call allows ``approve`` (its unchanged arguments are sent as approve)."""
    per_call = [_call_allowed(c) for c in configs]
    common = set.intersection(*per_call) if per_call else set()
    if len(per_call) > 1 and any(DecisionKind.EDIT in k for k in per_call):
        if all(DecisionKind.EDIT in k or DecisionKind.APPROVE in k for k in per_call):
            common.add(DecisionKind.EDIT)
    return _sorted(common)


def _calls_schema(value: dict[str, Any], configs: list[dict[str, Any]]) -> dict[str, Any]:
    items = []
    for request, config in zip(value["action_requests"], configs, strict=True):
        args_schema = config.get(KEY_ARGS_SCHEMA)
        items.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": request.get("name")},
                    "args": args_schema if isinstance(args_schema, dict) else {"type": "object"},
                },
                "required": ["name", "args"],
            }
        )
    n = len(items)
    return {
        "type": "object",
        "properties": {
            "calls": {"type": "array", "prefixItems": items, "minItems": n, "maxItems": n}
        },
        "required": ["calls"],
    }


def _title(text: str, fallback: str) -> str:
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return (first or fallback)[:200]


def interrupt_from_value(
    value: Any, *, run_id: str, native_id: str, created_at: datetime, node: str = ""
) -> Interrupt:
    """One pending LangGraph interrupt as an irq ``Interrupt`` (one per interrupt id)."""
    common: dict[str, Any] = {
        "id": Interrupt.make_id(run_id, native_id),
        "run_id": run_id,
        "native_id": native_id,
        "created_at": created_at,
        # a policy guard's interrupt names its rule (the value, or its Agent Inbox request)
        "policy": InterruptPolicy.from_payload(
            (_inbox_request(value) or (value if isinstance(value, dict) else {})).get("policy")
        ),
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
        if len(requests) == 1:
            args = requests[0].get("args")
            schema = configs[0].get(KEY_ARGS_SCHEMA)
            return Interrupt(
                **common,
                title=f"Run tool {names[0]}?",
                description=descriptions[0],
                action=names[0],
                args=args if isinstance(args, dict) else {},
                args_schema=schema if isinstance(schema, dict) else None,
                allowed_decisions=_hitl_allowed(configs),
            )
        return Interrupt(
            **common,
            title=f"Run {len(requests)} tool calls: {', '.join(names)}?",
            description="\n\n".join(
                f"{i + 1}. {d or n}"
                for i, (n, d) in enumerate(zip(names, descriptions, strict=True))
            )
            + "\n\nOne decision for all calls; edit carries each call's arguments "
            "(unchanged calls are approved).",
            action=" + ".join(names),
            args={"calls": [{"name": r.get("name"), "args": r.get("args")} for r in requests]},
            args_schema=_calls_schema(value, configs),
            allowed_decisions=_hitl_allowed(configs),
        )
    if shape == "tool_approval":
        args = value.get("args")
        description = str(value.get("description") or "")
        return Interrupt(
            **common,
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
        requests = value["action_requests"]
        configs = _call_configs(value)
        if kind not in _hitl_allowed(configs):
            raise ShapeError(f"{kind.value} is not allowed for every call of this interrupt")
        if kind is DecisionKind.APPROVE:
            return {"decisions": [{"type": "approve"} for _ in requests]}
        if kind is DecisionKind.REJECT:
            one: dict[str, Any] = {"type": "reject"}
            if decision.feedback:
                one["message"] = decision.feedback
            return {"decisions": [dict(one) for _ in requests]}
        if kind is DecisionKind.RESPOND:
            return {
                "decisions": [
                    {"type": "respond", "message": _text(decision.response)} for _ in requests
                ]
            }
        edited_calls = _edited_calls(requests, decision.args or {})
        decisions: list[dict[str, Any]] = []
        for request, config, edited in zip(requests, configs, edited_calls, strict=True):
            if edited == request.get("args"):
                decisions.append({"type": "approve"})
            elif DecisionKind.EDIT in _call_allowed(config):
                decisions.append(
                    {"type": "edit", "edited_action": {"name": request.get("name"), "args": edited}}
                )
            else:
                raise ShapeError(f"the arguments of {request.get('name')} may not be edited")
        return {"decisions": decisions}
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


def _edited_calls(requests: list[dict[str, Any]], args: dict[str, Any]) -> list[Any]:
    """Each call's edited arguments: ``{"calls": [{"name", "args"}]}`` for several calls, the
    arguments themselves for one."""
    if len(requests) == 1:
        return [args]
    calls = args.get("calls")
    if not isinstance(calls, list) or len(calls) != len(requests):
        raise ShapeError(f"edit needs {{'calls': [...]}} with {len(requests)} entries")
    out = []
    for request, call in zip(requests, calls, strict=True):
        if not isinstance(call, dict) or call.get("name") != request.get("name"):
            raise ShapeError(f"calls must keep their order and names ({request.get('name')})")
        out.append(call.get("args"))
    return out
