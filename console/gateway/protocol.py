"""Wire messages between gateway and clients (version 1). See PROTOCOL.md.

Every frame is one JSON object with a ``type``. ``parse_client_frame`` and
``parse_agent_frame`` turn raw text into typed messages or raise :class:`FrameError` with a
stable ``code``; the server answers every such error with an error frame and stays up.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

# re-exported: callers import the caps, the heartbeat model and FrameError from here
from console.gateway.agent_heartbeat import MAX_INTERVAL_S as MAX_INTERVAL_S
from console.gateway.agent_heartbeat import MAX_RESOURCES as MAX_RESOURCES
from console.gateway.agent_heartbeat import MAX_SEQ as MAX_SEQ
from console.gateway.agent_heartbeat import MAX_TIMEOUT_S as MAX_TIMEOUT_S
from console.gateway.agent_heartbeat import AgentHeartbeat as AgentHeartbeat
from console.gateway.beat_validation import fast_beat
from console.gateway.wire_errors import MAX_REASON_CHARS as MAX_REASON_CHARS
from console.gateway.wire_errors import MAX_TARGETS as MAX_TARGETS
from console.gateway.wire_errors import FrameError as FrameError
from console.model import Action, DecisionKind

if TYPE_CHECKING:
    from console.gateway.alert_frames import AlertCommand
    from console.gateway.job_frames import JobCommand
    from console.gateway.policy_frames import PolicyCommand, PolicyEvent
    from console.gateway.release_frames import ReleaseResult

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 1 << 20  # 1 MiB
MAX_DEPTH = 64  # nesting of arrays/objects in one frame
MAX_BEAT_BYTES = 64 * 1024  # one heartbeat frame (details, resources) on the agent channel
MAX_BATCH_BEATS = 1000  # heartbeats in one ``heartbeats`` frame
MAX_FILTER_ITEMS = 256  # contexts or kinds in one subscription filter
EVENT_KINDS = ("run", "run_removed", "interrupt", "interrupt_removed", "backend", "audit",
               "notice", "obligation", "policy", "alert")


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ------------------------------------------------------------------ client -> gateway


class SubscriptionFilter(_Msg):
    """What a subscribed client is sent (PROTOCOL.md, "Subscriptions"); None: everything."""

    #: ``BACKEND:CONTEXT`` keys: runs, interrupts, backends, audit entries, notices and
    #: obligations of other contexts are not sent (events of no context still are)
    contexts: list[Annotated[str, Field(max_length=256)]] | None = Field(
        default=None, max_length=MAX_FILTER_ITEMS)
    #: event kinds sent (``beat`` events count as ``run``); the inbox: interrupt kinds only
    kinds: list[Literal["run", "run_removed", "interrupt", "interrupt_removed", "backend",
                        "audit", "notice", "obligation", "policy", "alert"]] | None = Field(
        default=None, max_length=MAX_FILTER_ITEMS)

    def admits(self, kind: str, scope: str | None) -> bool:
        """Is an event of ``kind`` about context ``scope`` (None: of no context) sent?"""
        if self.kinds is not None and (kind if kind != "beat" else "run") not in self.kinds:
            return False
        return self.contexts is None or scope is None or scope in self.contexts

    @property
    def key(self) -> str:
        """Equal filters, equal keys: clients with one filter share one encoding."""
        return repr((sorted(self.contexts) if self.contexts is not None else None,
                     sorted(self.kinds) if self.kinds is not None else None))


class Hello(_Msg):
    type: Literal["hello"]
    protocol: int = PROTOCOL_VERSION
    client: str = ""
    since: int | None = None  # last sequence number seen, to resume after a reconnect
    epoch: str | None = None  # gateway epoch the ``since`` belongs to
    subscribe: bool = True  # False: one-shot client (CLI listing), no event stream
    filter: SubscriptionFilter | None = None  # server-side subscription filter
    #: "run": a heartbeat that changes nothing but the run's heartbeat_at and progress is a
    #: full ``run`` event; "compact": a ``beat`` event ``{id, heartbeat_at, progress}``
    beats: Literal["run", "compact"] = "run"
    #: False (one-shot clients only): the welcome without the state; the client asks what it
    #: needs (``query what=runs``), so a listing does not pay for the whole snapshot
    snapshot: bool = True


class DecisionBody(_Msg):
    kind: DecisionKind
    args: dict[str, Any] | None = None
    feedback: str | None = Field(default=None, max_length=20_000)
    response: Any = None
    handler: str | None = Field(default=None, max_length=256)  # native: signal/update/shared
    topic: str | None = Field(default=None, max_length=256)  # DBOS recv(topic)
    decisions: list[DecisionBody] | None = Field(default=None, max_length=64)  # per call


class Command(_Msg):
    type: Literal["command"]
    id: str = Field(min_length=1, max_length=128)  # client-chosen idempotency key
    action: Action
    targets: list[Annotated[str, Field(max_length=1024)]] = Field(
        min_length=1, max_length=MAX_TARGETS)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    dry_run: bool = False
    decision: DecisionBody | None = None
    #: retry: the first step to run again (a step's name or index; None: the failed step)
    from_step: str | None = Field(default=None, max_length=256)
    #: release: the resource of the (one) target run to free
    resource: str | None = Field(default=None, max_length=512)


class Query(_Msg):
    type: Literal["query"]
    id: str = Field(min_length=1, max_length=128)
    what: Literal["run", "audit", "plan", "capabilities", "snapshot", "stats", "policy",
                  "policy_check", "obligations", "notify_test", "runs", "jobs", "job",
                  "alerts"]
    run_id: str | None = None
    invocation: dict[str, Any] | None = None  # policy_check: the Invocation to evaluate
    state: Literal["open", "fulfilled", "overdue", "waived"] | None = None  # obligations
    action: Action | None = None
    targets: list[str] | None = Field(default=None, max_length=MAX_TARGETS)
    from_step: str | None = Field(default=None, max_length=256)  # plan of a retry
    resource: str | None = Field(default=None, max_length=512)  # plan of a release
    limit: int = Field(default=100, ge=1, le=10_000)
    target_prefix: str | None = None
    since: datetime | None = None  # audit: entries at or after this time
    until: datetime | None = None  # audit: entries before this time
    identity: str | None = Field(default=None, max_length=1024)  # audit: this actor only
    actions: list[Annotated[str, Field(max_length=128)]] | None = Field(
        default=None, max_length=64)  # audit: these actions only
    # runs: the listing ``irq runs`` prints, filtered on the gateway
    states: list[Annotated[str, Field(max_length=64)]] | None = Field(default=None, max_length=32)
    backend: str | None = Field(default=None, max_length=1024)  # runs: dbos, or dbos:local
    expr: str | None = Field(default=None, max_length=4096)  # runs: the --filter grammar
    job_id: str | None = Field(default=None, max_length=128)  # job: which (irq jobs show)
    include_cleared: bool = False  # alerts: cleared ones too


class Focus(_Msg):
    type: Literal["focus"]
    run_ids: list[str] = Field(default_factory=list, max_length=MAX_TARGETS)


class Ping(_Msg):
    type: Literal["ping"]
    id: str | None = None


ClientFrame = Annotated[Hello | Command | Query | Focus | Ping, Field(discriminator="type")]
_client_adapter: TypeAdapter[Any] = TypeAdapter(ClientFrame)


# ------------------------------------------------------------------- agent -> gateway


class AgentHeartbeats:
    """A ``heartbeats`` frame: many beats in one frame. Each beat is checked on its own
    (:func:`heartbeat_item`): a refused one is a :class:`FrameError` in its place and does
    not refuse the others. ``items`` are the beats as decoded; ``beats`` the checked ones
    (checked when first asked for: the gateway takes plain beats by hand, plain_beats.py)."""

    __slots__ = ("items", "id", "_beats")

    def __init__(self, items: list[Any], id: str | None = None) -> None:
        self.items, self.id = items, id
        self._beats: list[AgentHeartbeat | FrameError] | None = None

    @property
    def beats(self) -> list[AgentHeartbeat | FrameError]:
        if self._beats is None:
            self._beats = [heartbeat_item(i, item, self.id)
                           for i, item in enumerate(self.items)]
        return self._beats


AgentFrame = Annotated[Hello | AgentHeartbeat | Ping, Field(discriminator="type")]
_agent_adapter: TypeAdapter[Any] = TypeAdapter(AgentFrame)


class _NonFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NonFinite(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(f"{text[:20]}… is not a finite number")
    return value


def _too_deep(data: Any, limit: int = MAX_DEPTH) -> bool:
    """Does ``data`` nest arrays/objects more than ``limit`` levels? (iterative: no recursion)"""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, dict | list))
    return False


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _long_digits(text: str | bytes) -> bool:
    """Does ``text`` hold 16 or more ASCII digits in a row? (bytes.translate, then a
    substring search: a twentieth of a regex's time on a 17 KB heartbeats frame)"""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return b"0" * 16 in raw.translate(_DIGITS_AS_ZERO)


def decode_json(text: str | bytes) -> Any:
    """Strict JSON: no NaN/Infinity literals, no number that overflows to infinity.

    Raises ``ValueError`` (a huge integer raises it too: Python refuses to convert more than
    4,300 digits) or ``RecursionError`` (absurd nesting).

    orjson first (several times faster on the agent channel's flood); what it refuses, and
    text with 16 or more digits in a row (orjson reads integers beyond 64 bits as floats),
    goes through the standard library so every refusal keeps its message."""
    if not _long_digits(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)


def _decode(raw: str | bytes, max_bytes: int) -> dict[str, Any]:
    if len(raw) > max_bytes:
        raise FrameError("too_large", f"frame exceeds {max_bytes} bytes")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("malformed", "frame is not UTF-8") from exc
    try:
        data = decode_json(raw)
    except RecursionError:
        raise FrameError("malformed", f"frame nests deeper than {MAX_DEPTH} levels") from None
    except _NonFinite as exc:
        raise FrameError("malformed", f"frame is not strict JSON: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, and int() of more than 4,300 digits
        text = str(exc)
        if "digits" in text and not isinstance(exc, json.JSONDecodeError):
            text = "an integer has too many digits"
        raise FrameError("malformed", f"frame is not JSON: {text[:200]}") from None
    if not isinstance(data, dict):
        raise FrameError("malformed", "frame must be a JSON object")
    if "type" not in data or not isinstance(data["type"], str):
        raise FrameError("malformed", "frame has no string 'type'")
    opens = raw.count("[") + raw.count("{")
    if opens > MAX_DEPTH and _may_be_deep(data, opens) and _nests_too_deep(data):
        raise FrameError("malformed", f"frame nests deeper than {MAX_DEPTH} levels", _ref(data))
    return data


def _may_be_deep(data: dict[str, Any], opens: int) -> bool:
    """Could ``data``, whose text opens ``opens`` arrays/objects, nest more than MAX_DEPTH
    levels? A heartbeats frame of many beats opens many objects side by side: each beat
    object opens at least one, so the deepest beat holds at most the rest, and the frame
    nests at most ``opens - (beat objects - 1)`` levels (brackets inside strings only make
    that bound larger)."""
    beats = data.get("beats")
    if data["type"] != "heartbeats" or type(beats) is not list:
        return True
    objects = sum(1 for b in beats if type(b) is dict)
    return opens - max(0, objects - 1) > MAX_DEPTH


def _nests_too_deep(data: dict[str, Any]) -> bool:
    """:func:`_too_deep` for a frame; a heartbeats frame beat by beat, walking only the
    beats' non-empty containers (irq's helper sends ``details: {}`` and ``resources: []``
    with every beat: the bracket bound above then says "maybe", and walking every value of
    100 beats cost 6 µs a beat)."""
    beats = data.get("beats")
    if data["type"] != "heartbeats" or type(beats) is not list:
        return _too_deep(data)
    if any(type(v) is dict or type(v) is list for k, v in data.items() if k != "beats"):
        return _too_deep(data)
    # the frame is level 1, its beats list 2, a beat 3: what a beat holds has MAX_DEPTH - 3
    for beat in beats:
        if type(beat) is dict:
            for value in beat.values():
                if (type(value) is dict or type(value) is list) and value and _too_deep(
                        value, MAX_DEPTH - 3):
                    return True
        elif type(beat) is list and _too_deep(beat, MAX_DEPTH - 2):
            return True
    return False


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


def _check_caps(data: dict[str, Any]) -> None:
    """Caps with a message that names them (pydantic's own would only say 'too long')."""
    targets = data.get("targets")
    if isinstance(targets, list) and len(targets) > MAX_TARGETS:
        raise FrameError(
            "invalid", f"targets: at most {MAX_TARGETS} per {data['type']} (got {len(targets)});"
            " split the work or select by filter", _ref(data))
    run_ids = data.get("run_ids")
    if isinstance(run_ids, list) and len(run_ids) > MAX_TARGETS:
        raise FrameError("invalid", f"run_ids: at most {MAX_TARGETS} (got {len(run_ids)})",
                         _ref(data))
    reason = data.get("reason")
    if isinstance(reason, str) and len(reason) > MAX_REASON_CHARS:
        raise FrameError(
            "invalid", f"reason: at most {MAX_REASON_CHARS} characters (got {len(reason)})",
            _ref(data))


def parse_client_frame(
    raw: str | bytes, max_bytes: int = MAX_FRAME_BYTES
) -> Hello | Command | Query | Focus | Ping | PolicyCommand | JobCommand | AlertCommand:
    data = _decode(raw, max_bytes)
    if data["type"] == "command" and data.get("action") in ("job_create", "job_cancel"):
        from console.gateway.job_frames import parse_job_command  # its own target cap

        return parse_job_command(data)
    _check_caps(data)
    if data["type"] == "command" and data.get("action") in ("alert_ack", "alert_silence"):
        from console.gateway.alert_frames import parse_alert_command

        return parse_alert_command(data)
    if data["type"] == "command" and data.get("action") in (
            "policy_reload", "obligation_fulfil", "obligation_waive"):
        from console.gateway.policy_frames import parse_policy_command

        return parse_policy_command(data)
    msg: Hello | Command | Query | Focus | Ping = _validate(
        _client_adapter, data, {"hello", "command", "query", "focus", "ping"})
    if isinstance(msg, Command):
        if msg.action is Action.DECIDE and (msg.decision is None or len(msg.targets) != 1):
            raise FrameError(
                "invalid", "decide needs a 'decision' and exactly one interrupt target", msg.id
            )
        if msg.action is not Action.DECIDE and msg.decision is not None:
            raise FrameError("invalid", "'decision' is only valid with action 'decide'", msg.id)
        if msg.action is Action.RELEASE and (not msg.resource or len(msg.targets) != 1):
            raise FrameError("invalid", "release needs a 'resource' and exactly one run target",
                             msg.id)
    return msg


def parse_agent_frame(
    raw: str | bytes, max_bytes: int = MAX_FRAME_BYTES
) -> Hello | AgentHeartbeat | AgentHeartbeats | Ping | PolicyEvent | ReleaseResult:
    data = _decode(raw, max_bytes)
    if data["type"] == "heartbeats":
        return parse_heartbeats(data)
    if data["type"] == "release_result":
        from console.gateway.release_frames import ReleaseResult

        result: ReleaseResult = _validate(TypeAdapter(ReleaseResult), data, {"release_result"})
        return result
    if data["type"] == "policy_event":
        from console.gateway.policy_frames import parse_policy_event

        return parse_policy_event(data, len(raw))
    if data["type"] == "heartbeat" and len(raw) > MAX_BEAT_BYTES:
        raise FrameError("too_large", f"a heartbeat frame may have at most {MAX_BEAT_BYTES}"
                         f" bytes (got {len(raw)})", _ref(data))
    msg: Hello | AgentHeartbeat | Ping = _validate(_agent_adapter, data,
                                                  {"hello", "heartbeat", "ping"})
    return msg


def parse_heartbeats(data: dict[str, Any]) -> AgentHeartbeats:
    """``{"type": "heartbeats", "id"?: str, "beats": [beat, …]}``: each beat is the body of a
    ``heartbeat`` frame (its ``type`` may be left out). The frame is refused as a whole only
    when ``beats`` is not a list of 1..1000 items; a bad beat is refused alone."""
    ref = _ref(data)
    beats = data.get("beats")
    if not isinstance(beats, list) or not beats:
        raise FrameError("invalid", "invalid heartbeats frame: beats: a non-empty list of "
                         "heartbeats is required", ref)
    if len(beats) > MAX_BATCH_BEATS:
        raise FrameError("invalid", f"beats: at most {MAX_BATCH_BEATS} per heartbeats frame "
                         f"(got {len(beats)}); send several frames", ref)
    extra = set(data) - {"type", "id", "beats"}
    if extra:
        raise FrameError("invalid", f"invalid heartbeats frame: unknown field "
                         f"{sorted(extra)[0]!r}", ref)
    return AgentHeartbeats(beats, ref)


def heartbeat_item(i: int, item: Any, ref: str | None) -> AgentHeartbeat | FrameError:
    """Item ``i`` of a heartbeats frame as a beat, or the error that refuses it alone."""
    where = f"beats[{i}]"
    if not isinstance(item, dict):
        return FrameError("invalid", f"{where}: a heartbeat object is required", ref)
    if item.setdefault("type", "heartbeat") != "heartbeat":
        return FrameError("invalid", f"{where}: type must be 'heartbeat'", ref)
    beat = fast_beat(item)
    if beat is not None:
        return beat
    try:
        return AgentHeartbeat.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return FrameError("invalid", f"{where}: {loc}: {first['msg']}", ref)


# ------------------------------------------------------------------ gateway -> client


def error_frame(code: str, message: str, ref: str | None = None) -> str:
    return dumps({"type": "error", "code": code, "message": message, "ref": ref})


def dumps(obj: dict[str, Any]) -> str:
    """Strict JSON out: a non-finite float (from a backend) becomes null, never ``NaN``."""
    return encode(obj).decode("utf-8")


def encode(obj: Any) -> bytes:
    """:func:`dumps` as UTF-8 bytes (sent as text frames), with orjson where it can: it
    already writes a non-finite float as null. What orjson refuses (an integer beyond 64
    bits, a key that is not a string) goes through the standard library."""
    try:
        out = orjson.dumps(obj, default=str)
        # orjson's bytes keep the capacity of its write buffer (~8 KiB even for a short
        # event): a copy of a small one is its own size, for the event log's sake
        return bytes(memoryview(out)) if len(out) < 65536 else out
    except TypeError:
        pass
    try:
        text = json.dumps(obj, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), separators=(",", ":"), default=str, allow_nan=False)
    return text.encode("utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
