"""Wire messages between gateway and clients (version 1). See PROTOCOL.md.

Every frame is one JSON object with a ``type``. ``parse_client_frame`` and
``parse_agent_frame`` turn raw text into typed messages or raise :class:`FrameError` with a
stable ``code``; the server answers every such error with an error frame and stays up.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from console.model import Action, DecisionKind, Resource

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 1 << 20  # 1 MiB
MAX_TARGETS = 1000


class FrameError(Exception):
    """A frame that cannot be accepted. ``code`` goes into the error frame."""

    def __init__(self, code: str, message: str, ref: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.ref = ref


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ------------------------------------------------------------------ client -> gateway


class Hello(_Msg):
    type: Literal["hello"]
    protocol: int = PROTOCOL_VERSION
    client: str = ""
    since: int | None = None  # last sequence number seen, to resume after a reconnect
    epoch: str | None = None  # gateway epoch the ``since`` belongs to
    subscribe: bool = True  # False: one-shot client (CLI listing), no event stream


class DecisionBody(_Msg):
    kind: DecisionKind
    args: dict[str, Any] | None = None
    feedback: str | None = Field(default=None, max_length=20_000)
    response: Any = None


class Command(_Msg):
    type: Literal["command"]
    id: str = Field(min_length=1, max_length=128)  # client-chosen idempotency key
    action: Action
    targets: list[str] = Field(min_length=1, max_length=MAX_TARGETS)
    reason: str = Field(default="", max_length=2000)
    dry_run: bool = False
    decision: DecisionBody | None = None


class Query(_Msg):
    type: Literal["query"]
    id: str = Field(min_length=1, max_length=128)
    what: Literal["run", "audit", "plan", "capabilities", "snapshot"]
    run_id: str | None = None
    action: Action | None = None
    targets: list[str] | None = Field(default=None, max_length=MAX_TARGETS)
    limit: int = Field(default=100, ge=1, le=10_000)
    target_prefix: str | None = None


class Focus(_Msg):
    type: Literal["focus"]
    run_ids: list[str] = Field(default_factory=list, max_length=MAX_TARGETS)


class Ping(_Msg):
    type: Literal["ping"]
    id: str | None = None


ClientFrame = Annotated[Hello | Command | Query | Focus | Ping, Field(discriminator="type")]
_client_adapter: TypeAdapter[Any] = TypeAdapter(ClientFrame)


# ------------------------------------------------------------------- agent -> gateway


class AgentHeartbeat(_Msg):
    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["heartbeat"]
    backend: str = Field(min_length=1, max_length=32)
    context: str | None = Field(default=None, max_length=128)
    native_id: str = Field(min_length=1, max_length=512)
    seq: int = 0
    at: datetime | None = None
    progress: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    resources: list[Resource] | None = None
    interval_s: float | None = Field(default=None, gt=0)
    timeout_s: float | None = Field(default=None, gt=0)
    in_flight_step: str | None = None
    phase: Literal["running", "waiting", "paused", "cancelled", "completed", "failed"] = (
        "running"
    )


AgentFrame = Annotated[Hello | AgentHeartbeat | Ping, Field(discriminator="type")]
_agent_adapter: TypeAdapter[Any] = TypeAdapter(AgentFrame)


def _decode(raw: str | bytes, max_bytes: int) -> dict[str, Any]:
    if len(raw) > max_bytes:
        raise FrameError("too_large", f"frame exceeds {max_bytes} bytes")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("malformed", "frame is not UTF-8") from exc
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FrameError("malformed", f"frame is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise FrameError("malformed", "frame must be a JSON object")
    if "type" not in data or not isinstance(data["type"], str):
        raise FrameError("malformed", "frame has no string 'type'")
    return data


def _ref(data: dict[str, Any]) -> str | None:
    ref = data.get("id")
    return ref if isinstance(ref, str) and len(ref) <= 128 else None


def _validate(adapter: TypeAdapter[Any], data: dict[str, Any], known: set[str]) -> Any:
    if data["type"] not in known:
        raise FrameError("unknown_type", f"unknown message type {data['type']!r}", _ref(data))
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != data["type"])
        raise FrameError(
            "invalid", f"invalid {data['type']} frame: {where}: {first['msg']}", _ref(data)
        ) from None
    except RecursionError:
        raise FrameError("malformed", "frame nests too deeply", _ref(data)) from None


def parse_client_frame(
    raw: str | bytes, max_bytes: int = MAX_FRAME_BYTES
) -> Hello | Command | Query | Focus | Ping:
    data = _decode(raw, max_bytes)
    msg = _validate(_client_adapter, data, {"hello", "command", "query", "focus", "ping"})
    if isinstance(msg, Command):
        if msg.action is Action.DECIDE and (msg.decision is None or len(msg.targets) != 1):
            raise FrameError(
                "invalid", "decide needs a 'decision' and exactly one interrupt target", msg.id
            )
        if msg.action is not Action.DECIDE and msg.decision is not None:
            raise FrameError("invalid", "'decision' is only valid with action 'decide'", msg.id)
    return msg


def parse_agent_frame(
    raw: str | bytes, max_bytes: int = MAX_FRAME_BYTES
) -> Hello | AgentHeartbeat | Ping:
    return _validate(_agent_adapter, _decode(raw, max_bytes), {"hello", "heartbeat", "ping"})


# ------------------------------------------------------------------ gateway -> client


def error_frame(code: str, message: str, ref: str | None = None) -> str:
    return dumps({"type": "error", "code": code, "message": message, "ref": ref})


def dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), default=str)
