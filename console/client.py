"""Websockets client of the gateway, shared by the CLI and the TUI (no Textual, no typer).

``GatewayClient`` is one connection: hello, snapshot, then events; commands and queries are
matched to their answers by id. ``LiveSession`` keeps a client connected, reconnecting with
backoff and resuming from the last sequence number, for ``irq watch`` and the TUI.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from console.prices import PriceTable

if TYPE_CHECKING:  # the models are imported where they are used: a one-shot query
    # (``irq runs -o json``) validates none, and their import was 0.08 s of its start
    from console.alert_model import Alert
    from console.model import (
        Action,
        AuditEntry,
        BackendHealth,
        CommandResult,
        Decision,
        Interrupt,
        Run,
    )
    from console.policy.model import Obligation
from console.protocol_version import PROTOCOL_VERSION as PROTOCOL_VERSION

#: the largest message a client takes: a snapshot of 100,000 runs is ~75 MB
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
#: a ``shed`` marker this recent means the gateway is still shedding this client's beats
SHED_RECENT_S = 1.5


class GatewayError(Exception):
    """An error the gateway (or the connection to it) reported. ``code`` is stable."""

    code = "error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


POLICY_VIOLATION = 1008  # websocket close code the gateway uses for a refused token


class Unauthorized(GatewayError):
    code = "unauthorized"


class GatewayUnreachable(GatewayError):
    code = "unreachable"


def new_key() -> str:
    """A fresh idempotency key."""
    return uuid.uuid4().hex


@dataclass
class FleetView:
    """The client's copy of the gateway's index, kept current by snapshot + events."""

    epoch: str = ""
    seq: int = 0
    runs: dict[str, Run] = field(default_factory=dict)
    interrupts: dict[str, Interrupt] = field(default_factory=dict)
    backends: dict[str, BackendHealth] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    notices: list[dict[str, Any]] = field(default_factory=list)
    received_at: datetime | None = None
    obligations: dict[str, Obligation] = field(default_factory=dict)
    policy: dict[str, Any] | None = None  # {version, source, loaded_at, rules} of the gateway
    #: the gateway's price table (its welcome; a recorded snapshot may carry one): the
    #: fleet's cost sort uses the prices the plans use (an older gateway sends none)
    prices: PriceTable = field(default_factory=PriceTable)
    alerts: dict[str, Alert] = field(default_factory=dict)  # active and recently cleared
    #: the gateway is shedding this client's beats (it fell behind: PROTOCOL.md, ``shed``):
    #: since when, and when the last marker came; see :meth:`liveness_now`
    shed_since: datetime | None = None
    shed_seen_at: datetime | None = None

    def load_snapshot(self, frame: dict[str, Any]) -> None:
        from console.alert_model import Alert
        from console.model import BackendHealth, Interrupt, Run
        from console.policy.model import Obligation

        self.epoch = frame.get("epoch", "")
        self.seq = int(frame.get("seq", 0))
        self.runs = {r["id"]: Run.model_validate(r) for r in frame.get("runs", [])}
        self.interrupts = {
            i["id"]: Interrupt.model_validate(i) for i in frame.get("interrupts", [])
        }
        self.backends = {}
        for b in frame.get("backends", []):
            health = BackendHealth.model_validate(b)
            self.backends[health.key] = health
        self.obligations = {
            o["id"]: Obligation.model_validate(o) for o in frame.get("obligations", [])
        }
        self.policy = frame.get("policy")
        if "prices" in frame:
            self.prices = PriceTable.from_contract(frame["prices"])
        self.alerts = {a["id"]: Alert.model_validate(a) for a in frame.get("alerts", [])}
        self.received_at = utcnow()

    def shedding(self, now: datetime) -> bool:
        """Is the gateway shedding this client's beats now? (a marker within SHED_RECENT_S:
        a shedding client gets one with every frame that had beats)"""
        return self.shed_seen_at is not None and (
            now - self.shed_seen_at).total_seconds() < SHED_RECENT_S

    def liveness_now(self, now: datetime) -> datetime:
        """The time to judge runs' heartbeat ages at: ``now``, or while the gateway sheds
        this client's beats, when that began -- their last beats here are older than the
        ones the gateway has, and a run that did fall silent comes as a state change (the
        gateway judges liveness on every beat). Else every run would look late a few
        seconds into shedding."""
        if self.shed_since is not None and self.shedding(now):
            return min(now, self.shed_since)
        return now

    def apply(self, event: dict[str, Any]) -> bool:
        """Apply one event; False when it was already applied (seq not newer)."""
        from console.alert_model import Alert
        from console.model import AuditEntry, BackendHealth, Interrupt, Run
        from console.policy.model import Obligation

        seq = int(event.get("seq", 0))
        if seq and seq <= self.seq:
            return False
        kind, data = event.get("kind"), event.get("data") or {}
        if kind == "run":
            run = Run.model_validate(data)
            self.runs[run.id] = run
        elif kind == "beat":  # compact beats: only the heartbeat time and progress moved
            old = self.runs.get(data.get("id", ""))
            if old is not None:
                at = data.get("heartbeat_at")
                self.runs[old.id] = old.model_copy(update={
                    "heartbeat_at": datetime.fromisoformat(at) if isinstance(at, str) else None,
                    "progress": data.get("progress")})
        elif kind == "run_removed":
            self.runs.pop(data.get("id", ""), None)
        elif kind == "interrupt":
            intr = Interrupt.model_validate(data)
            self.interrupts[intr.id] = intr
        elif kind == "interrupt_removed":
            self.interrupts.pop(data.get("id", ""), None)
        elif kind == "backend":
            health = BackendHealth.model_validate(data)
            self.backends[health.key] = health
        elif kind == "audit":
            self.audit.append(AuditEntry.model_validate(data))
            del self.audit[:-500]
        elif kind == "notice":
            self.notices.append(data)
            del self.notices[:-200]
        elif kind == "obligation":
            obligation = Obligation.model_validate(data)
            self.obligations[obligation.id] = obligation
        elif kind == "policy":
            self.policy = data
        elif kind == "alert":
            alert = Alert.model_validate(data)
            self.alerts[alert.id] = alert
        elif kind == "shed":
            now = utcnow()
            if not self.shedding(now):
                self.shed_since = now
            self.shed_seen_at = now
        if seq:
            self.seq = seq
        self.received_at = utcnow()
        return True

    def pending_interrupts(self) -> list[Interrupt]:
        pending = [i for i in self.interrupts.values() if i.status == "pending"]
        return sorted(pending, key=lambda i: i.created_at)


def utcnow() -> datetime:
    """console.model.utcnow, without importing the models."""
    return datetime.now(UTC)


def decode_frame(raw: str | bytes) -> Any:
    """A frame from the gateway: orjson (a 10,000-run listing is ~10 MB: 3x faster than the
    standard library), the standard library for what orjson refuses (integers past 64 bits)."""
    import orjson

    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


class GatewayClient:
    """One websockets connection to the gateway."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        client: str = "irq-cli",
        subscribe: bool = True,
        snapshot: bool = True,
        open_timeout: float = 5.0,
        request_timeout: float = 60.0,
        view: FleetView | None = None,
        compact_beats: bool = False,
    ) -> None:
        """``compact_beats``: a beat that moved only a run's heartbeat time and progress
        comes as a ``beat`` event (id, time, progress: ~130 bytes) instead of the run's
        whole contract (~800); the view applies either."""
        self.url = url
        self.token = token
        self.client = client
        self.subscribe = subscribe
        #: False (with ``subscribe=False``): no state at hello, ``view`` stays empty; the
        #: caller asks queries (``irq runs``: ``query("runs")``)
        self.snapshot = snapshot or subscribe
        self.open_timeout = open_timeout
        self.request_timeout = request_timeout
        self.view = view or FleetView()
        self.compact_beats = compact_beats
        self.identity = ""
        self.role = ""
        self.server = ""
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._updates: asyncio.Queue[list[dict[str, Any]] | None] = asyncio.Queue()
        self._ready: asyncio.Future[None] | None = None
        self.closed_reason: str | None = None

    async def __aenter__(self) -> GatewayClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open, say hello (resuming from ``view.seq`` if it has one), wait for the state."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            self._ws = await asyncio.wait_for(
                connect(
                    self.url,
                    additional_headers=headers,
                    max_size=MAX_MESSAGE_BYTES,
                    open_timeout=self.open_timeout,
                    ping_interval=20,
                    ping_timeout=20,
                ),
                self.open_timeout + 1,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            body = exc.response.body.decode("utf-8", "replace").strip() if exc.response.body else ""
            if status in (401, 403):
                raise Unauthorized(body or f"gateway refused the token (HTTP {status})") from None
            raise GatewayUnreachable(f"gateway answered HTTP {status} at {self.url}") from None
        except InvalidURI as exc:
            raise GatewayError(f"bad gateway URL {self.url!r}: {exc}", "usage") from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise GatewayUnreachable(
                f"cannot reach the gateway at {self.url}: {exc or type(exc).__name__}"
            ) from None
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._reader = asyncio.create_task(self._read_loop())
        hello: dict[str, Any] = {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "client": self.client,
            "subscribe": self.subscribe,
        }
        if not self.snapshot:
            hello["snapshot"] = False
        if self.compact_beats:
            hello["beats"] = "compact"
        if self.view.epoch and self.view.seq:
            hello.update(since=self.view.seq, epoch=self.view.epoch)
        await self._send(hello)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.request_timeout)
        except TimeoutError:
            await self.close()
            raise GatewayUnreachable("the gateway did not send its state in time") from None

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        self._fail_pending(GatewayUnreachable("connection closed"))

    async def _send(self, frame: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise GatewayUnreachable("not connected")
        try:
            await self._ws.send(json.dumps(frame, default=str))
        except ConnectionClosed as exc:
            raise closed_error(exc) from None

    def _fail_pending(self, exc: GatewayError) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(exc)
            self._ready.exception()  # mark retrieved

    async def _read_loop(self) -> None:
        from websockets.exceptions import ConnectionClosed

        failure: GatewayError | None = None
        try:
            async for raw in self._ws:
                try:
                    frame = decode_frame(raw)
                except ValueError:  # json's and orjson's decode errors are ValueErrors
                    continue
                if isinstance(frame, dict):
                    self._dispatch(frame)
            self.closed_reason = "closed by the gateway"
        except ConnectionClosed as exc:
            self.closed_reason = f"connection lost: {exc}"
            failure = closed_error(exc)
        except asyncio.CancelledError:
            self.closed_reason = "closed"
            raise
        finally:
            self._fail_pending(
                failure or GatewayUnreachable(self.closed_reason or "connection closed")
            )
            self._updates.put_nowait(None)

    def _dispatch(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "welcome":
            self.identity = frame.get("identity", "")
            self.role = frame.get("role", "")
            self.server = frame.get("server", "")
            self.view.prices = PriceTable.from_contract(frame.get("prices"))
            if not self.snapshot:
                self._mark_ready()  # nothing else comes until it asks
        elif kind == "snapshot":
            self.view.load_snapshot(frame)
            self._mark_ready()
            self._updates.put_nowait([{"kind": "snapshot", "seq": self.view.seq}])
        elif kind == "events":
            if frame.get("epoch") and frame["epoch"] != self.view.epoch and self.view.epoch:
                return  # stale replay from another gateway life; a snapshot follows
            applied = [e for e in frame.get("events", []) if self.view.apply(e)]
            if frame.get("replay"):
                self._mark_ready()
            if applied:
                self._updates.put_nowait(applied)
        elif kind in ("result", "answer", "pong"):
            fut = self._pending.pop(str(frame.get("id")), None)
            if fut is not None and not fut.done():
                fut.set_result(frame)
        elif kind == "error":
            ref = frame.get("ref")
            fut = self._pending.pop(str(ref), None) if ref else None
            err = _error_from_frame(frame)
            if fut is not None and not fut.done():
                fut.set_exception(err)
            elif self._ready is not None and not self._ready.done():
                self._ready.set_exception(err)
            else:
                self.view.notices.append({"level": "error", "message": err.message})

    def _mark_ready(self) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    async def _request(self, frame: dict[str, Any]) -> dict[str, Any]:
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[frame["id"]] = fut
        try:
            await self._send(frame)
            return await asyncio.wait_for(fut, self.request_timeout)
        except TimeoutError:
            raise GatewayUnreachable(
                f"no answer from the gateway within {self.request_timeout:g}s"
            ) from None
        finally:
            self._pending.pop(frame["id"], None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # the connection failed while sending: asyncio logs it not
                # ("Future exception was never retrieved"); the send's own error is raised

    async def command(
        self,
        action: Action | str,
        targets: list[str],
        *,
        reason: str = "",
        dry_run: bool = False,
        decision: Decision | None = None,
        key: str | None = None,
        from_step: str | None = None,
        resource: str | None = None,
    ) -> list[CommandResult]:
        from console.model import Action

        frame: dict[str, Any] = {
            "type": "command",
            "id": key or new_key(),
            "action": Action(action).value,
            "targets": targets,
            "reason": reason,
            "dry_run": dry_run,
        }
        if decision is not None:
            frame["decision"] = decision.model_dump(mode="json", exclude_none=True)
        if from_step is not None:  # retry: the first step to run again
            frame["from_step"] = from_step
        if resource is not None:  # release: the resource of the run to free
            frame["resource"] = resource
        answer = await self._request(frame)
        return _results(answer)

    async def named_command(
        self, action: str, targets: list[str], *, reason: str = "", key: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> list[CommandResult]:
        """A command that is not a run action: ``policy_reload`` (targets ``["policy"]``),
        ``obligation_fulfil`` / ``obligation_waive`` (targets: obligation ids; the reason is
        the note), ``alert_ack`` / ``alert_silence`` (``extra={"for_s": ...}``). Sent by
        name: the gateway checks it and the caller's role."""
        frame: dict[str, Any] = {
            "type": "command",
            "id": key or new_key(),
            "action": action,
            "targets": targets,
            "reason": reason,
            "dry_run": False,
            **(extra or {}),
        }
        answer = await self._request(frame)
        return _results(answer)

    async def job_command(
        self, action: str, targets: list[str], *, reason: str = "", key: str | None = None,
        **fields: Any,
    ) -> list[CommandResult]:
        """``job_create`` (targets: the confirmed targets; ``job_action``, ``filter``,
        ``rate_per_s``, ``decision``, ``merge_args``) or ``job_cancel`` (targets: the job id):
        durable bulk jobs the gateway drives (console/gateway/job_commands.py)."""
        frame: dict[str, Any] = {"type": "command", "id": key or new_key(), "action": action,
                                 "targets": targets, "reason": reason}
        frame.update({k: v for k, v in fields.items() if v is not None})
        answer = await self._request(frame)
        return _results(answer)

    async def query(self, what: str, **params: Any) -> Any:
        frame = {"type": "query", "id": new_key(), "what": what}
        frame.update({k: v for k, v in params.items() if v is not None})
        answer = await self._request(frame)
        return answer.get("data")

    async def focus(self, run_ids: list[str]) -> None:
        await self._send({"type": "focus", "run_ids": run_ids})

    async def ping(self) -> float:
        """Round trip time in seconds."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        await self._request({"type": "ping", "id": new_key()})
        return loop.time() - start

    async def updates(self) -> list[dict[str, Any]] | None:
        """Next batch of applied events (``[{'kind': 'snapshot'}]`` after a snapshot);
        None when the connection has closed."""
        return await self._updates.get()


def _results(answer: dict[str, Any]) -> list[CommandResult]:
    """A ``result`` frame's command results."""
    from console.model import CommandResult

    return [CommandResult.model_validate(r) for r in answer.get("results", [])]


def closed_error(exc: Exception) -> GatewayError:
    """The error a closed connection means: a token refused after the handshake (close code
    1008 naming the token, e.g. revoked between the handshake and the session) is
    ``Unauthorized``, not a network failure worth retrying; a 1008 for a hello that came
    too late is worth retrying."""
    received = getattr(exc, "rcvd", None)
    if (received is not None and received.code == POLICY_VIOLATION
            and any(word in received.reason for word in ("token", "unauthorized"))):
        return Unauthorized(received.reason)
    return GatewayUnreachable(f"connection to the gateway closed: {exc}")


def _error_from_frame(frame: dict[str, Any]) -> GatewayError:
    code = str(frame.get("code") or "error")
    message = str(frame.get("message") or code)
    if code in ("unauthorized", "forbidden"):
        return Unauthorized(message, code)
    return GatewayError(message, code)


@dataclass
class ConnectionStatus:
    state: str  # connecting | live | reconnecting | unauthorized
    detail: str = ""
    since: datetime = field(default_factory=utcnow)
    attempts: int = 0


async def call_back(cb: Callable[..., Awaitable[None] | None], *args: Any) -> None:
    """Call ``cb`` and await what it returns, if that is awaitable (callbacks may be either)."""
    out = cb(*args)
    if inspect.isawaitable(out):
        await out


class LiveSession:
    """Keeps a subscribed client connected; resumes from the last seq after each reconnect."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        client: str = "irq-tui",
        on_update: Callable[[FleetView, list[dict[str, Any]]], Awaitable[None] | None],
        on_status: Callable[[ConnectionStatus], Awaitable[None] | None],
        max_backoff: float = 5.0,
        compact_beats: bool = False,
    ) -> None:
        self.url = url
        self.compact_beats = compact_beats
        self.token = token
        self.client_name = client
        self.view = FleetView()
        self.on_update = on_update
        self.on_status = on_status
        self.max_backoff = max_backoff
        self.client: GatewayClient | None = None
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        attempts = 0
        while not self._stop.is_set():
            await call_back(
                self.on_status,
                ConnectionStatus(
                    "connecting" if attempts == 0 else "reconnecting", "", attempts=attempts
                ),
            )
            client = GatewayClient(self.url, self.token, client=self.client_name, view=self.view,
                                   compact_beats=self.compact_beats)
            try:
                await client.connect()
            except Unauthorized as exc:
                await call_back(self.on_status, ConnectionStatus("unauthorized", exc.message))
                return
            except GatewayError as exc:
                attempts += 1
                await call_back(
                    self.on_status, ConnectionStatus("reconnecting", exc.message, attempts=attempts)
                )
                await self._sleep(min(self.max_backoff, 0.25 * 2**attempts))
                continue
            self.client = client
            attempts = 0
            try:
                await call_back(self.on_status, ConnectionStatus("live", client.server))
                while not self._stop.is_set():
                    batch = await self._next(client)
                    if batch is None:
                        break
                    await call_back(self.on_update, self.view, batch)
            finally:  # also when the task is cancelled: never leave the socket half-open
                self.client = None
                await client.close()
            if not self._stop.is_set():
                attempts += 1
                await call_back(
                    self.on_status,
                    ConnectionStatus(
                        "reconnecting", client.closed_reason or "connection lost", attempts=attempts
                    ),
                )
                await self._sleep(min(self.max_backoff, 0.25 * 2**attempts))

    async def _next(self, client: GatewayClient) -> list[dict[str, Any]] | None:
        stop = asyncio.ensure_future(self._stop.wait())
        upd = asyncio.ensure_future(client.updates())
        try:
            done, _ = await asyncio.wait({stop, upd}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not upd.done():
                upd.cancel()
        if upd in done:
            return upd.result()
        return None

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
