"""Wire frames of the policy layer (PROTOCOL.md): what agents report (``policy_event``) and the
operator commands on the policy and on obligations.

Agents send ``policy_event`` frames with ``event`` = ``decision`` (a PolicyDecision taken for one
tool call), ``obligation`` (an obligation opened, or waived by a dispensation) or
``obligation_fulfilled``. Every field is checked here; the checks that need the gateway (scope,
binding, clock) are in the server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from console.gateway.wire_errors import MAX_REASON_CHARS, MAX_TARGETS, FrameError
from console.policy.model import Obligation, PolicyDecision

MAX_POLICY_EVENT_BYTES = 256 * 1024  # one policy_event frame on the agent channel
POLICY_ACTIONS = ("policy_reload", "obligation_fulfil", "obligation_waive")

_Id = Annotated[str, Field(min_length=1, max_length=1024)]


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _RunEvent(_Frame):
    type: Literal["policy_event"]
    backend: str = Field(min_length=1, max_length=32)
    context: str | None = Field(default=None, max_length=128)
    native_id: str = Field(min_length=1, max_length=512)


class DecisionEvent(_RunEvent):
    event: Literal["decision"]
    call_id: str = Field(min_length=1, max_length=256)
    at: datetime | None = None
    tool: str = Field(min_length=1, max_length=256)
    decision: PolicyDecision


class ObligationEvent(_RunEvent):
    event: Literal["obligation"]
    obligation: Obligation

    @model_validator(mode="after")
    def _opened_or_waived(self) -> ObligationEvent:
        ob = self.obligation
        if ob.state not in ("open", "waived"):
            raise ValueError(f"obligation.state: an agent opens ('open') or waives ('waived') "
                             f"an obligation, not {ob.state!r}")
        if ob.state == "waived" and not ob.by:
            raise ValueError("obligation.by: a waived obligation names the dispense rule")
        if not ob.id or not ob.rule or not ob.what:
            raise ValueError("obligation: id, rule and what must not be empty")
        if len(ob.id) > 1024 or len(ob.what) > 2000 or len(ob.note) > MAX_REASON_CHARS:
            raise ValueError("obligation: id (1024), what (2000) or note (2000) too long")
        return self


class FulfilledEvent(_RunEvent):
    event: Literal["obligation_fulfilled"]
    id: _Id
    note: str = Field(default="", max_length=MAX_REASON_CHARS)


PolicyEvent = DecisionEvent | ObligationEvent | FulfilledEvent
_event_adapter: TypeAdapter[Any] = TypeAdapter(
    Annotated[PolicyEvent, Field(discriminator="event")])


class PolicyCommand(_Frame):
    """``{"type": "command", "action": "policy_reload" | "obligation_fulfil" |
    "obligation_waive", ...}``: executed by policy_commands.py."""

    type: Literal["command"]
    id: str = Field(min_length=1, max_length=128)
    action: Literal["policy_reload", "obligation_fulfil", "obligation_waive"]
    targets: list[_Id] = Field(min_length=1, max_length=MAX_TARGETS)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    dry_run: bool = False


_command_adapter: TypeAdapter[PolicyCommand] = TypeAdapter(PolicyCommand)


def parse_policy_event(data: dict[str, Any], size: int) -> PolicyEvent:
    """A decoded ``policy_event`` frame, validated; FrameError otherwise."""
    ref = data.get("id") if isinstance(data.get("id"), str) else None
    if size > MAX_POLICY_EVENT_BYTES:
        raise FrameError("too_large", f"a policy_event frame may have at most "
                         f"{MAX_POLICY_EVENT_BYTES} bytes (got {size})", ref)
    if data.get("event") not in ("decision", "obligation", "obligation_fulfilled"):
        raise FrameError("invalid", "invalid policy_event frame: event: expected 'decision', "
                         f"'obligation' or 'obligation_fulfilled', got {data.get('event')!r}",
                         ref)
    event: PolicyEvent = _validated(_event_adapter, data, ref, tagged=True)
    return event


def parse_policy_command(data: dict[str, Any]) -> PolicyCommand:
    ref = data.get("id") if isinstance(data.get("id"), str) else None
    command: PolicyCommand = _validated(_command_adapter, data, ref)
    if command.action == "policy_reload" and command.targets != ["policy"]:
        raise FrameError("invalid", "policy_reload takes the single target 'policy'", command.id)
    if command.action != "policy_reload" and not command.reason.strip():
        raise FrameError("invalid", f"{command.action} needs a reason (the note kept with the "
                         "obligation)", command.id)
    return command


def _validated(adapter: TypeAdapter[Any], data: dict[str, Any], ref: str | None, *,
               tagged: bool = False) -> Any:
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first.get("loc", ()))
        where = ".".join(str(p) for p in (loc[1:] if tagged else loc))
        raise FrameError("invalid", f"invalid {data.get('type')} frame: "
                         f"{where + ': ' if where else ''}{first['msg']}", ref) from None
    except RecursionError:
        raise FrameError("malformed", "frame nests too deeply", ref) from None
