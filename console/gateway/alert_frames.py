"""Wire frames of operator commands on alerts (PROTOCOL.md "Alerts"): ``alert_ack`` and
``alert_silence`` (``for_s``: how long), each with a reason."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from console.gateway.wire_errors import MAX_REASON_CHARS, MAX_TARGETS, FrameError

ALERT_ACTIONS = ("alert_ack", "alert_silence")
MAX_SILENCE_S = 30 * 86_400.0


class AlertCommand(BaseModel):
    """``{"type": "command", "action": "alert_ack" | "alert_silence", "targets": [ID],
    "reason": ..., "for_s": 7200}``: executed by alert_commands.py."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["command"]
    id: str = Field(min_length=1, max_length=128)
    action: Literal["alert_ack", "alert_silence"]
    targets: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        min_length=1, max_length=MAX_TARGETS)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    dry_run: bool = False
    for_s: float | None = Field(default=None, gt=0, le=MAX_SILENCE_S)  # alert_silence


_adapter: TypeAdapter[AlertCommand] = TypeAdapter(AlertCommand)


def parse_alert_command(data: dict[str, Any]) -> AlertCommand:
    ref = data.get("id") if isinstance(data.get("id"), str) else None
    try:
        command = _adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise FrameError("invalid", f"invalid command frame: {where + ': ' if where else ''}"
                         f"{first['msg']}", ref) from None
    if not command.reason.strip():
        raise FrameError("invalid", f"{command.action} needs a reason (kept with the alert "
                         "and audited)", command.id)
    if command.action == "alert_silence" and command.for_s is None:
        raise FrameError("invalid", "alert_silence needs 'for_s' (seconds)", command.id)
    return command
