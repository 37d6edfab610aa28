"""Push agent heartbeats to the gateway's agent channel, from a background thread.

For backends without native heartbeats (DBOS, Restate, LangGraph) instrumented agents push
liveness samples to ``irq serve``. The pusher never raises into the agent and never blocks it:
``push()`` only stores the frame (the latest one per run; older unsent samples are dropped,
and so is a frame pushed after a newer one of its run, see ``console.semantics.beat_is_stale``)
and a daemon thread sends them over one websocket, reconnecting with backoff while the gateway
is down or not configured. A killed process simply goes silent, which is the signal.

Configuration: ``IRQ_AGENT_URL`` (e.g. ``ws://127.0.0.1:7433/agent``) and ``IRQ_AGENT_TOKEN``
(sent as ``Authorization: Bearer <token>``): an agent token whose scope covers the runs this
process reports (``irq token create --role agent --scope dbos:local``); the gateway refuses
beats outside it (``out_of_scope``) and beats for a run another token reports
(``bound_to_other``). Wire format, one JSON text message each:

- first, ``{"type": "hello", "protocol": 1, "client": "irq-agent/0.1"}``
- then ``{"type": "heartbeat", "backend", "context", "native_id", "seq", "at", "progress",
  "details", "resources", "interval_s", "timeout_s", "in_flight_step", "phase"}``
- with ``batch=N`` (or ``IRQ_AGENT_BATCH=N``), N > 1: the frames waiting at one send go out
  as ``{"type": "heartbeats", "beats": [heartbeat, …]}`` of at most N (<= 1000) beats each
  (a gateway with protocol 1 from before batching answers ``unknown_type``: leave it at 1);
- the gateway may answer ``{"type": "error", "code", "message"}``: logged (once per code a
  minute, with the count of the ones held back), never fatal;
- the gateway may ask ``{"type": "release", "id", "backend", "context", "native_id",
  "resource", "kind", "reason"}`` (``irq release --force``): served by the release callback
  registered with ``backend_adapters.release_callbacks.on_release`` (release_requests.py),
  answered ``{"type": "release_result", "id", "outcome", "detail"}`` after the run's next
  beat, which reports the resource released.

The same connection carries the policy layer (``backend_adapters.policy_guard``): the gateway
sends ``{"type": "policy", "version", "policy"}`` after the hello and after every reload; each
one read is handed to ``shared_policy().update`` (or the ``on_policy`` callback).
:meth:`HeartbeatPusher.ensure_connected` opens the connection even when no heartbeat is
queued (a guard asks for the policy before its run's first beat), and
:meth:`HeartbeatPusher.send_event` queues ``policy_event`` frames that must all arrive, unlike
heartbeats: a FIFO (bounded at 10,000 frames; beyond that the oldest is dropped, counted in
``events_dropped`` and logged), sent in order, kept across reconnects. After each batch the
pusher sends ``{"type": "ping", "id": "irq-ev-N"}``; the gateway handles an agent's frames in
order and answers ``pong``, so a frame counts as delivered once the pong that follows it
arrives. Frames sent but not yet confirmed when the connection drops (a gateway killed with
frames in its socket buffer) are sent again after the reconnect, ahead of newer ones, and so
is a batch during which the gateway answered ``rate_limited`` (one second later):
at-least-once; the gateway is idempotent by obligation id and by (run, call_id, tool).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from websockets.sync.client import ClientConnection, connect

from backend_adapters.release_callbacks import ReleaseCallbacks, shared_release_callbacks
from backend_adapters.release_requests import ReleaseRequests
from console.semantics import beat_is_stale

log = logging.getLogger("irq.agent.heartbeat")

PROTOCOL = 1
CLIENT = "irq-agent/0.1"
ENV_URL = "IRQ_AGENT_URL"
ENV_TOKEN = "IRQ_AGENT_TOKEN"
ENV_BATCH = "IRQ_AGENT_BATCH"
MAX_BATCH = 1000  # beats in one heartbeats frame (the gateway's limit)

FrameKey = tuple[str, str | None, str]
ERROR_LOG_INTERVAL_S = 60.0  # one warning per error code per interval (a refused fleet is loud)
MAX_EVENTS = 10_000  # policy_event frames held for delivery (send_event)
EVENT_PING_PREFIX = "irq-ev-"  # ping ids that confirm the event frames sent before them


def heartbeat_frame(
    *,
    native_id: str,
    seq: int,
    phase: str,
    backend: str = "dbos",
    context: str | None = None,
    progress: float | None = None,
    details: Mapping[str, Any] | None = None,
    resources: Iterable[Mapping[str, Any]] = (),
    interval_s: float | None = None,
    timeout_s: float | None = None,
    in_flight_step: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """One heartbeat frame in the agent-channel shape."""
    return {
        "type": "heartbeat",
        "backend": backend,
        "context": context,
        "native_id": native_id,
        "seq": seq,
        "at": (at or datetime.now(UTC)).isoformat(),
        "progress": progress,
        "details": dict(details or {}),
        "resources": [dict(r) for r in resources],
        "interval_s": interval_s,
        "timeout_s": timeout_s,
        "in_flight_step": in_flight_step,
        "phase": phase,
    }


def _seq_and_at(frame: Mapping[str, Any]) -> tuple[int, datetime | None]:
    seq = frame.get("seq")
    raw = frame.get("at")
    try:
        at = datetime.fromisoformat(raw) if isinstance(raw, str) else raw
    except ValueError:
        at = None
    return (seq if isinstance(seq, int) else 0), (at if isinstance(at, datetime) else None)


class HeartbeatPusher:
    """Latest-frame-per-run mailbox drained by one sender thread (started on first push)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        client: str = CLIENT,
        min_backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        open_timeout_s: float = 3.0,
        max_pending: int = 1000,
        max_events: int = MAX_EVENTS,
        on_policy: Callable[[dict[str, Any]], None] | None = None,
        batch: int | None = None,
        releases: ReleaseCallbacks | None = None,
    ) -> None:
        """``releases``: the release callbacks forced releases are served by (default: the
        process-wide ones ``release_callbacks.on_release`` registers)."""
        self._url = url
        self._batch = max(1, min(MAX_BATCH, batch if batch is not None else _env_batch()))
        self._max_pending = max_pending
        self._token = token
        self._client = client
        self._min_backoff = min_backoff_s
        self._max_backoff = max_backoff_s
        self._open_timeout = open_timeout_s
        self._pending: dict[FrameKey, dict[str, Any]] = {}
        # the newest (seq, at) accepted per run, so an older frame pushed late is dropped
        self._accepted: OrderedDict[FrameKey, tuple[int, datetime | None]] = OrderedDict()
        self._sending = 0  # frames taken from the mailbox and not yet sent
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._ws: ClientConnection | None = None
        self.sent = 0  # frames delivered to the socket (for tests and diagnostics)
        self.dropped = 0  # unsent frames replaced by a newer one, or older than one accepted
        self.errors: list[dict[str, Any]] = []  # last error frames from the gateway
        self._error_log: dict[str, tuple[float, int]] = {}  # code -> (last logged, held back)
        # policy layer: reliable event frames, and the policy frames the gateway sends
        self._max_events = max_events
        self._events: deque[dict[str, Any]] = deque()  # not yet sent, oldest first
        self._unconfirmed: list[tuple[int, dict[str, Any]]] = []  # (ping n, frame) sent
        self._event_pings = 0
        self._rate_limited = False  # the gateway dropped frames since the last pong
        self._events_resume_at = 0.0  # events wait until then after a rate_limited batch
        self._connected_at = 0.0
        self._on_policy = on_policy
        self.events_sent = 0  # event frames written to the socket (re-sends included)
        self.events_confirmed = 0  # event frames a gateway pong confirmed
        self.events_dropped = 0  # event frames dropped because the FIFO was full
        self.policy_frames = 0  # policy frames received
        #: forced releases the gateway asks for (release_requests.py)
        self.releases = ReleaseRequests(
            releases if releases is not None else shared_release_callbacks(),
            self.push, self.send_event, max_runs=10 * max_pending)

    # ------------------------------------------------------------------------- agent side

    def push(self, frame: Mapping[str, Any]) -> None:
        """Queue ``frame`` for sending; replaces an unsent frame of the same run. Never raises."""
        try:
            key: FrameKey = (
                str(frame.get("backend")),
                frame.get("context"),
                str(frame.get("native_id")),
            )
            seq, at = _seq_and_at(frame)
            with self._cond:
                if self._closing:
                    return
                last = self._accepted.get(key)
                if last is not None and beat_is_stale(seq, at, *last):
                    self.dropped += 1  # built before a frame already queued or sent
                    return
                self._accepted[key] = (seq, at)
                self._accepted.move_to_end(key)
                while len(self._accepted) > 10 * self._max_pending:
                    self._accepted.popitem(last=False)
                if key in self._pending:
                    self.dropped += 1
                    del self._pending[key]  # re-insert: the mailbox stays oldest-first
                elif len(self._pending) >= self._max_pending:
                    self._pending.pop(next(iter(self._pending)))
                    self.dropped += 1
                self._pending[key] = self.releases.reported(key, dict(frame))
                self._ensure_thread()
                self._cond.notify_all()
        except Exception:  # a heartbeat must never break the agent
            log.debug("heartbeat push failed", exc_info=True)

    def send_event(self, frame: Mapping[str, Any]) -> None:
        """Queue a frame that must arrive (a ``policy_event``): FIFO, kept across reconnects,
        re-sent until a gateway pong confirms it. Never raises."""
        try:
            with self._cond:
                if self._closing:
                    return
                if len(self._events) >= self._max_events:
                    self._events.popleft()
                    self.events_dropped += 1
                    if self.events_dropped == 1 or self.events_dropped % 1000 == 0:
                        log.warning(
                            "agent channel: %d policy events dropped (more than %d queued "
                            "while the gateway is unreachable)",
                            self.events_dropped,
                            self._max_events,
                        )
                self._events.append(dict(frame))
                self._ensure_thread()
                self._cond.notify_all()
        except Exception:  # reporting must never break the agent
            log.debug("event push failed", exc_info=True)

    def ensure_connected(self) -> bool:
        """Connect (in the background) even with nothing to send, so the gateway's policy
        frame arrives; False when no gateway is configured (nothing will ever arrive)."""
        url, _token = self._target()
        if not url:
            return False
        with self._cond:
            if self._closing:
                return False
            self._ensure_thread()  # once started, the thread stays connected
            self._cond.notify_all()
        return True

    @property
    def events_pending(self) -> int:
        """Event frames not yet confirmed by the gateway (queued or sent)."""
        with self._cond:
            return len(self._events) + len(self._unconfirmed)

    def flush(self, timeout_s: float = 2.0) -> bool:
        """Wait until every queued frame was sent (and every event frame confirmed); False
        on timeout (gateway down)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending or self._sending or self._events or self._unconfirmed:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._thread is None:
                    return False
                self._cond.wait(min(remaining, 0.1))
        return True

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what is queued (up to ``timeout_s``), then stop the thread."""
        self.flush(timeout_s)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    @property
    def connected(self) -> bool:
        return self._ws is not None

    # ------------------------------------------------------------------------ sender side

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="irq-heartbeat-push", daemon=True
            )
            self._thread.start()

    def _target(self) -> tuple[str | None, str | None]:
        return (
            self._url or os.environ.get(ENV_URL) or None,
            self._token or os.environ.get(ENV_TOKEN) or None,
        )

    def _connect(self) -> ClientConnection | None:
        url, token = self._target()
        if not url:
            return None
        headers = {"Authorization": f"Bearer {token}"} if token else None
        # entered as a context manager (websockets >= 17 deprecates bare use); _disconnect
        # closes it
        ws = connect(
            url,
            additional_headers=headers,
            open_timeout=self._open_timeout,
            close_timeout=1.0,
            user_agent_header=self._client,
        ).__enter__()
        ws.send(json.dumps({"type": "hello", "protocol": PROTOCOL, "client": self._client}))
        return ws

    def _run(self) -> None:
        backoff = self._min_backoff
        announced_down = False
        while True:
            with self._cond:
                if self._closing:
                    break
            if self._ws is None:
                try:
                    self._ws = self._connect()
                except Exception as exc:  # gateway down: retry with backoff
                    self._ws = None
                    if not announced_down:
                        log.warning("agent channel unavailable (%s); retrying", exc)
                        announced_down = True
                if self._ws is None:
                    self._sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff)
                    continue
                log.info("agent channel connected")
                self._connected_at = time.monotonic()
                announced_down = False
                backoff = self._min_backoff
            if not self._send_pending():
                self._disconnect()
                continue
            self._read_replies()
            with self._cond:
                held = not self._events or time.monotonic() < self._events_resume_at
                if not self._pending and held and not self._closing:
                    self._cond.wait(self._idle_wait())
        self._disconnect()

    def _idle_wait(self) -> float:
        """Seconds to wait for new frames: short while a pong or the first policy frame is
        due (replies are read between waits), else 0.5."""
        if self._unconfirmed or self._events:  # a pong due, or events held after rate_limited
            return 0.05
        if self.policy_frames == 0 and time.monotonic() - self._connected_at < 10.0:
            return 0.05
        return 0.5

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            if not self._closing:
                self._cond.wait(seconds)

    def _send_pending(self) -> bool:
        with self._cond:
            batch = list(self._pending.items())
            self._pending.clear()
            self._sending = len(batch)
        ws = self._ws
        size = self._batch
        for i in range(0, len(batch), size):
            chunk = batch[i : i + size]
            try:
                assert ws is not None
                if len(chunk) == 1:
                    ws.send(json.dumps(chunk[0][1], default=str))
                else:
                    ws.send(json.dumps({"type": "heartbeats", "beats": [f for _k, f in chunk]},
                                       default=str))
            except Exception as exc:  # connection lost: keep unsent frames
                log.info("agent channel lost (%s); reconnecting", exc)
                with self._cond:
                    for k, f in batch[i:]:
                        self._pending.setdefault(k, f)  # unless superseded meanwhile
                    self._sending = 0
                    self._cond.notify_all()
                return False
            self.sent += len(chunk)
            with self._cond:
                self._sending -= len(chunk)
                self._cond.notify_all()
        return self._send_events()

    def _send_events(self) -> bool:
        """Send the queued event frames in order, then a ping whose pong confirms them."""
        with self._cond:
            if not self._events or time.monotonic() < self._events_resume_at:
                return True
            batch = list(self._events)
            self._events.clear()
            self._event_pings += 1
            n = self._event_pings
            self._unconfirmed.extend((n, f) for f in batch)
            if len(self._unconfirmed) > self._max_events:  # a gateway that never answers
                del self._unconfirmed[: len(self._unconfirmed) - self._max_events]
        ws = self._ws
        try:
            assert ws is not None
            for frame in batch:
                ws.send(json.dumps(frame, default=str))
                self.events_sent += 1
            ws.send(json.dumps({"type": "ping", "id": f"{EVENT_PING_PREFIX}{n}"}))
        except Exception as exc:  # connection lost: _disconnect re-queues the unconfirmed
            log.info("agent channel lost (%s); reconnecting", exc)
            return False
        return True

    def _confirm_events(self, ping_id: Any) -> None:
        if not isinstance(ping_id, str) or not ping_id.startswith(EVENT_PING_PREFIX):
            return
        try:
            n = int(ping_id[len(EVENT_PING_PREFIX) :])
        except ValueError:
            return
        with self._cond:
            kept = [(k, f) for k, f in self._unconfirmed if k > n]
            done = [f for k, f in self._unconfirmed if k <= n]
            self._unconfirmed = kept
            if self._rate_limited:
                # the gateway dropped some frame of these over its budget: all again, later
                self._rate_limited = False
                self._events.extendleft(reversed(done))
                self._events_resume_at = time.monotonic() + 1.0
            else:
                self.events_confirmed += len(done)
            self._cond.notify_all()

    def _requeue_unconfirmed(self) -> None:
        """Sent but never confirmed: the gateway may not have handled them; send again first."""
        with self._cond:
            self._rate_limited = False
            if self._unconfirmed:
                self._events.extendleft(f for _n, f in reversed(self._unconfirmed))
                self._unconfirmed = []
                while len(self._events) > self._max_events:
                    self._events.pop()  # the newest: keep the order of what is re-sent
                    self.events_dropped += 1
                self._cond.notify_all()

    def _handle_policy(self, frame: dict[str, Any]) -> None:
        self.policy_frames += 1
        try:
            if self._on_policy is not None:
                self._on_policy(frame)
            else:
                _deliver_policy(frame)
        except Exception:
            log.warning("could not apply the gateway's policy frame", exc_info=True)

    def _read_replies(self) -> None:
        ws = self._ws
        if ws is None:
            return
        while True:
            try:
                raw = ws.recv(timeout=0)
            except TimeoutError:
                return
            except Exception:  # closed by the gateway: reconnect next round
                self._disconnect()
                return
            try:
                reply = json.loads(raw)
            except (TypeError, ValueError):
                continue
            if not isinstance(reply, dict):
                continue
            kind = reply.get("type")
            if kind == "error":
                self.errors = [*self.errors[-19:], reply]
                self._log_error(reply)
                if reply.get("code") == "rate_limited" and self._unconfirmed:
                    self._rate_limited = True
            elif kind == "pong":
                self._confirm_events(reply.get("id"))
            elif kind == "policy":
                self._handle_policy(reply)
            elif kind == "release":  # an operator forces a resource of one of our runs free
                self.releases.request(reply)

    def _log_error(self, reply: Mapping[str, Any]) -> None:
        code = str(reply.get("code"))
        now = time.monotonic()
        last, held = self._error_log.get(code, (None, 0))
        if last is not None and now - last < ERROR_LOG_INTERVAL_S:
            self._error_log[code] = (last, held + 1)
            return
        self._error_log[code] = (now, 0)
        more = f" ({held} more like it in the last {ERROR_LOG_INTERVAL_S:g} s)" if held else ""
        log.warning("gateway rejected a frame: %s %s%s", code, reply.get("message"), more)

    def _disconnect(self) -> None:
        ws, self._ws = self._ws, None
        self._requeue_unconfirmed()
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass


#: where pushers without an ``on_policy`` callback hand the gateway's policy frames: set by
#: backend_adapters.policy_guard when it is imported (the guard depends on the pusher, never
#: the other way round). The last frame is kept: a guard imported after the pusher connected
#: (the gateway sends the policy once, right after the hello) still gets it.
_policy_sink: Callable[[dict[str, Any]], None] | None = None
_last_policy_frame: dict[str, Any] | None = None
_policy_lock = threading.Lock()


def _env_batch() -> int:
    try:
        return int(os.environ.get(ENV_BATCH, "1"))
    except ValueError:
        return 1


def _deliver_policy(frame: dict[str, Any]) -> None:
    global _last_policy_frame
    with _policy_lock:  # held while the sink runs: frames reach it in the order read
        _last_policy_frame = frame
        if _policy_sink is not None:
            _policy_sink(frame)


def set_policy_sink(sink: Callable[[dict[str, Any]], None] | None) -> None:
    """Route policy frames read by every pusher without its own ``on_policy`` to ``sink``,
    starting with the last one already read (if any)."""
    global _policy_sink
    with _policy_lock:
        _policy_sink = sink
        if sink is not None and _last_policy_frame is not None:
            sink(_last_policy_frame)


_shared: HeartbeatPusher | None = None
_shared_lock = threading.Lock()


def shared_pusher() -> HeartbeatPusher:
    """The process-wide pusher configured from IRQ_AGENT_URL / IRQ_AGENT_TOKEN."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = HeartbeatPusher()
        return _shared
