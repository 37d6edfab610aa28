"""The gateway process: adapters, hub, journal and the websockets server (``irq serve``).

Paths: ``/`` for clients (viewer, operator, admin), ``/agent`` for instrumented agents pushing
heartbeats (agent, operator, admin), ``/healthz`` answers plain HTTP 200. The bearer token is
checked at the handshake: a missing or unknown token gets HTTP 401, a wrong role 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from backend_adapters.base import Backend, BackendError
from backend_adapters.registry import BackendURLError, open_backend, parse_backend_url
from console.gateway.auth import Principal, TokenStore, bearer_token, tokens_path
from console.gateway.commands import CommandExecutor
from console.gateway.hub import Hub, Subscriber
from console.gateway.journal import Journal, JournalPauseLedger
from console.gateway.protocol import (
    PROTOCOL_VERSION,
    AgentHeartbeat,
    Command,
    FrameError,
    Hello,
    Ping,
    Query,
    dumps,
    error_frame,
    parse_agent_frame,
    parse_client_frame,
)
from console.gateway.settings import GatewaySettings
from console.model import BackendHealth, Role, Run, utcnow

log = logging.getLogger("irq.gateway")

SERVER_NAME = "irq-gateway/0.1"
HARD_FRAME_LIMIT = 16 * 1024 * 1024  # beyond this websockets closes with 1009
HELLO_TIMEOUT_S = 10.0


class Gateway:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.hub = Hub(event_log_size=settings.event_log_size)
        self.journal = Journal(settings.journal_path)
        self.ledger = JournalPauseLedger(self.journal)
        self.tokens = TokenStore(tokens_path(settings.home))
        self.backends: dict[str, Backend] = {}
        for raw in settings.backends:
            parsed = parse_backend_url(raw)
            backend = open_backend(parsed, self.ledger)
            if parsed.poll_s:
                backend.poll_interval_s = parsed.poll_s
            key = f"{backend.name}:{backend.context}"
            if key in self.backends:
                raise BackendURLError(f"two backends share the context {key!r}; set ?context=")
            self.backends[key] = backend
            self.hub.set_health(BackendHealth(backend=backend.name, context=backend.context,
                                              url=parsed.display, reachable=False,
                                              error="connecting"))
        self.executor = CommandExecutor(self.hub, self.journal, self.backends,
                                        release_verify_s=settings.release_verify_s)
        self._tasks: list[asyncio.Task[Any]] = []
        self._server: Any = None
        self._polled: dict[str, asyncio.Event] = {k: asyncio.Event() for k in self.backends}
        self.port = settings.port

    # ------------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        from websockets.asyncio.server import serve

        ssl_ctx = None
        if self.settings.certfile and self.settings.keyfile:
            ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_ctx.load_cert_chain(str(self.settings.certfile), str(self.settings.keyfile))
        self._server = await serve(
            self._handle, self.settings.host, self.settings.port,
            process_request=self._process_request, max_size=HARD_FRAME_LIMIT, ssl=ssl_ctx,
            ping_interval=20, ping_timeout=20, close_timeout=2, server_header=SERVER_NAME,
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]
        for key, backend in self.backends.items():
            self._tasks.append(asyncio.create_task(self._poll_loop(key, backend)))
        self._tasks.append(asyncio.create_task(self._every(
            self.settings.heartbeat_coalesce_s, self.hub.flush_heartbeats)))
        self._tasks.append(asyncio.create_task(self._every(1.0, self.hub.tick)))
        self._tasks.append(asyncio.create_task(self._recovery_loop()))
        log.info("irq gateway listening on %s://%s:%d (%d backends)", self.settings.scheme,
                 self.settings.host, self.port, len(self.backends))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        for backend in self.backends.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(backend.close(), 5)
        self.journal.close()

    async def _every(self, seconds: float, fn: Any) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                fn()
            except Exception:  # keep the loop alive; a bug here must not stop liveness
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    # --------------------------------------------------------------------------- polling

    async def _poll_loop(self, key: str, backend: Backend) -> None:
        started = False
        failures = 0
        url = self.hub.backends[key].url
        while True:
            last_ok = self.hub.backends[key].last_ok_at
            try:
                if not started:
                    await asyncio.wait_for(backend.start(), 30)
                    started = True
                obs = await asyncio.wait_for(backend.observe(), 60)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                message = exc.message if isinstance(exc, BackendError) else (
                    "timed out" if isinstance(exc, TimeoutError)
                    else f"adapter error: {type(exc).__name__}: {exc}")
                if not isinstance(exc, BackendError | TimeoutError):
                    log.exception("adapter %s failed", key)
                self.hub.set_health(BackendHealth(backend=backend.name, context=backend.context,
                                                  url=url, reachable=False, last_ok_at=last_ok,
                                                  error=message))
                self._polled[key].set()
                await asyncio.sleep(min(10.0, backend.poll_interval_s * 2 ** min(failures, 4)))
                continue
            failures = 0
            health = BackendHealth(backend=backend.name, context=backend.context, url=url,
                                   reachable=True, last_ok_at=utcnow())
            self.hub.set_health(health)
            self.hub.observe_runs(obs.runs, obs.gone)
            self.hub.observe_interrupts(key, obs.interrupts, obs.complete, self.journal.decision)
            self._polled[key].set()
            await asyncio.sleep(backend.poll_interval_s)

    async def _recovery_loop(self) -> None:
        """Re-drive journaled intents without outcome once every backend was polled."""
        await asyncio.gather(*(e.wait() for e in self._polled.values()))
        while True:
            try:
                left = await self.executor.recover()
            except Exception:
                log.exception("recovery failed")
                left = 1
            if left == 0:
                return
            await asyncio.sleep(5)

    # ------------------------------------------------------------------------ handshake

    def _principal(self, request: Any) -> Principal | None:
        return self.tokens.authenticate(bearer_token(request.headers.get("Authorization")))

    def _process_request(self, connection: Any, request: Any) -> Any:
        path = urlsplit(request.path).path
        if path == "/healthz":
            return connection.respond(HTTPStatus.OK, "ok\n")
        if path not in ("/", "/agent"):
            return connection.respond(HTTPStatus.NOT_FOUND, "unknown path\n")
        principal = self._principal(request)
        if principal is None:
            return connection.respond(HTTPStatus.UNAUTHORIZED,
                                      "missing or unknown token (irq token create --role R)\n")
        if path == "/agent" and principal.role is Role.VIEWER:
            return connection.respond(HTTPStatus.FORBIDDEN, "a viewer token cannot push\n")
        if path == "/" and principal.role is Role.AGENT:
            return connection.respond(HTTPStatus.FORBIDDEN, "an agent token cannot connect here\n")
        return None

    async def _handle(self, ws: Any) -> None:
        principal = self._principal(ws.request)
        if principal is None:  # token revoked between handshake and here
            await ws.close(1008, "unauthorized")
            return
        try:
            if urlsplit(ws.request.path).path == "/agent":
                await self._agent_session(ws)
            else:
                await self._client_session(ws, principal)
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if not isinstance(exc, ConnectionClosed):
                log.exception("session failed")

    # ----------------------------------------------------------------- client sessions

    async def _client_session(self, ws: Any, who: Principal) -> None:
        hello = await self._await_hello(ws, parse_client_frame)
        if hello is None:
            return
        await ws.send(dumps({
            "type": "welcome", "protocol": PROTOCOL_VERSION, "server": SERVER_NAME,
            "identity": who.identity, "role": who.role.value, "epoch": self.hub.epoch,
            "seq": self.hub.seq,
            "max_frame_bytes": self.settings.max_frame_bytes,
        }))
        wake = asyncio.Event()
        sub: Subscriber | None = None
        flusher: asyncio.Task[None] | None = None
        replay = None
        if hello.since is not None and hello.epoch == self.hub.epoch:
            replay = self.hub.events_since(hello.since)
        if replay is not None:
            first: dict[str, Any] = {"type": "events", "epoch": self.hub.epoch,
                                     "events": replay, "replay": True}
        else:
            first = self.hub.snapshot()
        if hello.subscribe:
            sub = Subscriber(wake=wake.set)
            self.hub.subscribers.add(sub)  # same tick as the snapshot: no event falls between
        tasks: set[asyncio.Task[None]] = set()
        try:
            await ws.send(dumps(first))
            if sub is not None:
                flusher = asyncio.create_task(self._flush(ws, sub, wake))
            async for raw in ws:
                try:
                    msg = parse_client_frame(raw, self.settings.max_frame_bytes)
                except FrameError as exc:
                    await ws.send(error_frame(exc.code, exc.message, exc.ref))
                    continue
                task = asyncio.create_task(self._client_message(ws, who, msg))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            if sub is not None:
                self.hub.subscribers.discard(sub)
            if flusher is not None:
                flusher.cancel()
            for task in tasks:
                task.cancel()

    async def _await_hello(self, ws: Any, parse: Any) -> Hello | None:
        while True:
            try:
                raw = await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT_S)
            except TimeoutError:
                await ws.close(1008, "no hello")
                return None
            try:
                msg = parse(raw, self.settings.max_frame_bytes)
            except FrameError as exc:
                await ws.send(error_frame(exc.code, exc.message, exc.ref))
                continue
            if isinstance(msg, Hello):
                if msg.protocol != PROTOCOL_VERSION:
                    await ws.send(error_frame(
                        "unsupported_protocol",
                        f"gateway speaks protocol {PROTOCOL_VERSION}, client {msg.protocol}"))
                    await ws.close(1002, "protocol version")
                    return None
                return msg
            await ws.send(error_frame("expected_hello", "send a hello frame first",
                                      getattr(msg, "id", None)))

    async def _flush(self, ws: Any, sub: Subscriber, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            await asyncio.sleep(self.settings.flush_interval_s)
            wake.clear()
            if sub.overflowed:
                sub.overflowed = False
                sub.pending = []
                await ws.send(dumps(self.hub.snapshot()))
                continue
            batch, sub.pending = sub.pending, []
            if batch:
                await ws.send(dumps({"type": "events", "epoch": self.hub.epoch, "events": batch}))

    async def _client_message(self, ws: Any, who: Principal, msg: Any) -> None:
        try:
            if isinstance(msg, Command):
                results = await self.executor.execute(msg, who)
                await ws.send(dumps({"type": "result", "id": msg.id,
                                     "results": [r.contract() for r in results]}))
            elif isinstance(msg, Query):
                data = await self._answer(msg)
                await ws.send(dumps({"type": "answer", "id": msg.id, "data": data}))
            elif isinstance(msg, Ping):
                await ws.send(dumps({"type": "pong", "id": msg.id}))
            elif isinstance(msg, Hello):
                await ws.send(error_frame("invalid", "hello was already received"))
            else:  # Focus
                self._focus(msg.run_ids)
        except FrameError as exc:
            await ws.send(error_frame(exc.code, exc.message, exc.ref or getattr(msg, "id", None)))
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if isinstance(exc, ConnectionClosed):
                return
            log.exception("handling %s failed", type(msg).__name__)
            with contextlib.suppress(Exception):
                await ws.send(error_frame("internal", f"{type(exc).__name__}: {exc}",
                                          getattr(msg, "id", None)))

    def _focus(self, run_ids: list[str]) -> None:
        by_backend: dict[str, set[str]] = {}
        for run_id in run_ids:
            head, _, native = run_id.partition("/")
            by_backend.setdefault(head, set()).add(native)
        for key, backend in self.backends.items():
            backend.focus(by_backend.get(key, set()))

    async def _answer(self, q: Query) -> Any:
        now = utcnow()
        if q.what == "snapshot":
            return self.hub.snapshot(now)
        if q.what == "capabilities":
            return {k: b.capabilities().contract() for k, b in self.backends.items()}
        if q.what == "audit":
            entries = self.journal.audit_entries(limit=q.limit, target_prefix=q.target_prefix)
            return [e.contract() for e in entries]
        if q.what == "plan":
            if q.action is None or not q.targets:
                raise FrameError("invalid", "plan needs 'action' and 'targets'", q.id)
            return self.executor.plan_for(q.action, q.targets).contract()
        # run detail
        if not q.run_id:
            raise FrameError("invalid", "run needs 'run_id'", q.id)
        run = self.hub.runs.get(q.run_id)
        if run is None:
            raise FrameError("not_found", f"no such run: {q.run_id}", q.id)
        return await self._run_detail(run, now)

    async def _run_detail(self, run: Run, now: Any) -> dict[str, Any]:
        data = run.contract(now)
        backend = self.executor.backend_for(run)
        journal: list[dict[str, Any]] = []
        native_beats: list[dict[str, Any]] = []
        errors: list[str] = []
        if backend is not None:
            backend.focus({run.native_id})
            try:
                steps = await asyncio.wait_for(backend.journal(run.native_id), 15)
                journal = [s.contract() for s in steps]
            except (BackendError, TimeoutError) as exc:
                errors.append(f"journal unavailable: {getattr(exc, 'message', 'timed out')}")
            try:
                beats = await asyncio.wait_for(backend.heartbeats(run.native_id), 15)
                native_beats = [b.contract() for b in beats]
            except (BackendError, TimeoutError) as exc:
                errors.append(f"heartbeats unavailable: {getattr(exc, 'message', 'timed out')}")
            data["capabilities"] = backend.capabilities().contract()
        if run.in_flight_step and not any(s["status"] == "in_flight" for s in journal):
            journal.append({"index": len(journal), "name": run.in_flight_step,
                            "status": "in_flight", "started_at": None, "completed_at": None,
                            "detail": "reported by the agent"})
        pushed = [b.contract() for b in self.hub.history.get(run.id, [])]
        data["journal"] = journal
        data["heartbeats"] = native_beats + pushed
        data["interrupts_detail"] = [
            i.contract(now) for i in self.hub.interrupts.values() if i.run_id == run.id
        ]
        data["audit"] = [e.contract() for e in self.journal.audit_entries(
            limit=50, target_prefix=run.id)]
        data["errors"] = errors
        return data

    # ------------------------------------------------------------------ agent sessions

    async def _agent_session(self, ws: Any) -> None:
        async for raw in ws:
            try:
                msg = parse_agent_frame(raw, self.settings.max_frame_bytes)
                if isinstance(msg, AgentHeartbeat):
                    self.hub.agent_heartbeat(self._agent_run_id(msg), msg)
                elif isinstance(msg, Ping):
                    await ws.send(dumps({"type": "pong", "id": msg.id}))
            except FrameError as exc:
                await ws.send(error_frame(exc.code, exc.message, exc.ref))

    def _agent_run_id(self, beat: AgentHeartbeat) -> str:
        if beat.context:
            key = f"{beat.backend}:{beat.context}"
            if key not in self.backends:
                raise FrameError("unknown_backend", f"this gateway has no backend {key}")
        else:
            keys = [k for k in self.backends if k.split(":", 1)[0] == beat.backend]
            if len(keys) != 1:
                raise FrameError(
                    "unknown_backend",
                    f"{len(keys)} {beat.backend} contexts here; set 'context' in the heartbeat")
            key = keys[0]
        return f"{key}/{beat.native_id}"


async def run_gateway(settings: GatewaySettings, *, ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM (or cancellation)."""
    gateway = Gateway(settings)
    await gateway.start()
    if ready is not None:
        ready.set()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await gateway.stop()
