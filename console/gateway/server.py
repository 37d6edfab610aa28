"""The gateway process: adapters, hub, journal and the websockets server (``irq serve``).

Paths: ``/`` for clients (viewer, operator, admin), ``/agent`` for instrumented agents pushing
heartbeats (agent tokens only), ``/healthz`` answers plain HTTP 200. The bearer token is
checked at the handshake: a missing or unknown token gets HTTP 401, a wrong role 403; both are
logged (rate-limited) with the peer. Trust rules and budgets: SECURITY.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
import time
from collections import Counter, OrderedDict
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from backend_adapters.base import Backend, BackendError
from backend_adapters.registry import BackendURLError, open_backend, parse_backend_url
from console.gateway.approval_store import ApprovalStore
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import Principal, TokenStore, bearer_token, tokens_path
from console.gateway.beat_checks import check_beat
from console.gateway.budgets import IdentityBuckets, TokenBucket
from console.gateway.commands import CommandExecutor
from console.gateway.context_leases import RENEW_S, TTL_S, ContextLeases
from console.gateway.hub import Event, Hub, Reporter, Subscriber, lag_decision
from console.gateway.journal import JournalPauseLedger
from console.gateway.journal_engines import open_journal
from console.gateway.journal_store import JournalUnavailable
from console.gateway.obligation_store import ObligationStore
from console.gateway.peering import PeerHub, Peering
from console.gateway.policy_commands import PolicyCommands
from console.gateway.policy_events import PolicyEvents
from console.gateway.policy_frames import PolicyCommand, PolicyEvent
from console.gateway.policy_queries import answer_policy_query
from console.gateway.policy_state import PolicyState, ReloadResult
from console.gateway.protocol import (
    PROTOCOL_VERSION,
    AgentHeartbeat,
    AgentHeartbeats,
    Command,
    FrameError,
    Hello,
    Ping,
    Query,
    SubscriptionFilter,
    decode_json,
    dumps,
    encode,
    error_frame,
    parse_agent_frame,
    parse_client_frame,
)
from console.gateway.refusals import RefusalLedger
from console.gateway.settings import GatewaySettings
from console.gateway.shared_tokens import SharedTokens
from console.gateway.webhooks import Webhooks
from console.gc_policy import GcPolicy
from console.model import AuditEntry, BackendHealth, Role, Run, utcnow
from console.run_filter import listed_runs

log = logging.getLogger("irq.gateway")

SERVER_NAME = "irq-gateway/0.1"
HARD_FRAME_LIMIT = 16 * 1024 * 1024  # beyond this websockets closes with 1009
HELLO_TIMEOUT_S = 10.0  # on / and on /agent
HANDSHAKE_LOG_INTERVAL_S = 10.0  # refused handshakes: one log line per peer and reason
# a shared journal: liveness renewed every second, lapsed after a few; orphans looked for
LIVENESS_RENEW_S, LIVENESS_TTL_S, ADOPT_INTERVAL_S = 1.0, 5.0, 1.0
#: the answer to a command or query the journal's database could not serve (error code
#: ``unreachable``, exit 6 in the CLI); the database's own message stays in the gateway's log
JOURNAL_UNAVAILABLE = ("the gateway's journal is unavailable: the command was not recorded "
                       "as done; retry with the same idempotency key (it takes effect once)")
SNAPSHOT_REUSE_S = 0.5  # an encoded snapshot serves every client asking within this time
SNAPSHOT_FRAGMENT = 256 * 1024  # a large snapshot goes out in fragments of this size
SNAPSHOT_CHUNK = 500  # runs encoded between two looks at the time ...
SNAPSHOT_SLICE_S = 0.05  # ... and the event loop let through after this long (a turn with
# the loop for every 500 runs gave a build under load less than half the CPU: it took longer
# than the event log reaches back, and the client was resynced at once)
EVENTS_PER_FRAME = 5_000  # at most this many events in one events frame
FRAME_CACHE_BYTES = 8 << 20  # events frames kept for the clients that ask next
BUDGET_BYTES = 2048  # a heartbeats frame costs one budget frame per 2 KiB (about ten beats)
#: the collector's thresholds: with 100,000 runs indexed, the default (700 allocations) ran a
#: young collection every few beats and a full one (all runs traversed) every few seconds
GC_THRESHOLDS = (50_000, 50, 100)


class HandshakeLog:
    """Logs refused handshakes with peer and reason, at most one line per (peer, status,
    reason) per interval, with the count of the ones it held back."""

    def __init__(self, interval_s: float = HANDSHAKE_LOG_INTERVAL_S, max_keys: int = 4096,
                 clock: Any = time.monotonic) -> None:
        self.interval_s, self.max_keys, self.clock = interval_s, max_keys, clock
        self._last: dict[tuple[str, int, str], tuple[float, int]] = {}
        self.refused = 0

    def refused_handshake(self, peer: str, status: int, reason: str, path: str) -> None:
        self.refused += 1
        key = (peer.rsplit(":", 1)[0], status, reason)  # per host: each attempt has a new port
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return
        held = last[1] if last is not None else 0
        if len(self._last) >= self.max_keys:
            self._last.clear()
        self._last[key] = (now, 0)
        log.warning("refused handshake from %s on %s: HTTP %d %s%s", peer, path, status, reason,
                    f" ({held} more like it in the last {self.interval_s:g} s)" if held else "")


class Gateway:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        gc.set_threshold(*GC_THRESHOLDS)
        #: survivors frozen each second (console/gc_policy.py); a full collection after the
        #: index grew by half (a first poll of 100,000 runs), not at a random later second
        self.gc_policy = GcPolicy(young=0)
        self._gc_runs = 0  # runs indexed at the last full collection
        self.policy = PolicyState(settings.policy_path)
        self.policy.load()  # PolicyError (file, rule, key) before anything else is opened
        self.journal = open_journal(settings.journal_target, owner=settings.owner)
        #: four-eyes approvals: what the hub shows of them, what the executor records
        self.approvals = ApprovalView(ApprovalStore(self.journal), lambda: self.policy.engine)
        self.hub: Hub = PeerHub(event_log_size=settings.event_log_size,
                                max_lag=settings.max_client_lag,
                                interrupt_overlay=self.approvals.show)
        # encode once for all clients: events frames by (range, filter, beat form), snapshots
        # by filter (SNAPSHOT_REUSE_S)
        self._frames: OrderedDict[tuple[int, int, str, bool], bytes | None] = OrderedDict()
        self._frame_bytes = 0
        self._snapshots: dict[str, tuple[float, int, bytes]] = {}
        self._building: dict[str, asyncio.Future[tuple[int, bytes]]] = {}
        self.obligations = ObligationStore(self.journal)
        self.policy_events = PolicyEvents(self.hub, self.obligations)
        self.hub.snapshot_parts["policy"] = self.policy.summary
        self.hub.snapshot_parts["obligations"] = lambda: [
            ob.model_dump(mode="json") for ob in self.obligations.snapshot()]
        self._agents: set[Any] = set()  # open /agent connections (policy frames go to all)
        self.ledger = JournalPauseLedger(self.journal)
        self.tokens = TokenStore(tokens_path(settings.home))
        if not self.journal.exclusive:  # tokens of every gateway on this journal count here
            self.tokens.share(SharedTokens(self.journal, settings.owner).sync)
        self._open_sessions: dict[Any, Principal] = {}  # websocket -> who (token lifecycle)
        self._closing: set[asyncio.Task[None]] = set()
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
        self.refusals = RefusalLedger(self._audit_refusal,
                                      interval_s=settings.refusal_interval_s)
        self.executor = CommandExecutor(self.hub, self.journal, self.backends,
                                        approvals=self.approvals,
                                        release_verify_s=settings.release_verify_s,
                                        refusals=self.refusals,
                                        # until each backend's first poll succeeds
                                        unread=set(self.backends))
        # a shared journal: each backend context polled by one gateway (its leaseholder),
        # what each observes sent to the others (context_leases.py, peering.py)
        self.leases = ContextLeases(self.journal, settings.owner, list(self.backends))
        self._lease_held: dict[str, asyncio.Event] = {k: asyncio.Event() for k in self.backends}
        self._lease_warned_at = 0.0
        self.peering = Peering(self.hub, self.journal, self.leases,
                               decided=self.journal.decision,
                               refresh_interrupt=self.executor.refresh_approvals,
                               on_context_read=self._context_read)
        self.policy_commands = PolicyCommands(self.hub, self.journal, self.obligations,
                                              self.policy, self._policy_reloaded, self.refusals)
        self.handshakes = HandshakeLog()
        self.counters: Counter[str] = Counter()
        self._agent_budget = IdentityBuckets(settings.agent_identity_frames_per_s,
                                             settings.agent_identity_frames_burst)
        self._command_budget = IdentityBuckets(settings.commands_per_s,
                                               settings.commands_burst)
        self._client_budget = IdentityBuckets(settings.client_identity_frames_per_s,
                                              settings.client_identity_frames_burst)
        self._unscoped_warned: set[str] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self._server: Any = None
        self._polled: dict[str, asyncio.Event] = {k: asyncio.Event() for k in self.backends}
        self.port = settings.port
        self.webhooks = Webhooks(settings.notify, settings.url)
        if self.webhooks.hooks:
            self.hub.listeners.append(self._notify)

    def add_backend(self, key: str, backend: Backend, url: str = "") -> None:
        """One more backend context, before :meth:`start` (one not built from a URL: the
        benchmarks' synthetic backends); read, leased and polled like the configured ones."""
        if key in self.backends:
            raise BackendURLError(f"two backends share the context {key!r}; set ?context=")
        self.backends[key] = backend  # the executor's dict too
        self.executor.unread.add(key)
        self._polled[key] = asyncio.Event()
        self._lease_held[key] = asyncio.Event()
        self.leases.contexts = sorted({*self.leases.contexts, key})
        if not self.leases.shared:
            self.leases.held.add(key)
        self.hub.set_health(BackendHealth(backend=backend.name, context=backend.context,
                                          url=url, reachable=False, error="connecting"))

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
            # no permessage-deflate: it would compress each frame once per client (the
            # frames are encoded once for all of them) and cost more CPU than the fan-out
            compression=None,
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]
        self.webhooks.gateway = f"{self.settings.scheme}://{self.settings.host}:{self.port}"
        if self.leases.shared and not self.settings.gateway_id and not self.settings.port:
            # --port 0: HOST:0 would name every such gateway alike; the port it got names it
            import socket

            self.leases.holder = f"{socket.gethostname()}:{self.port}"
            self.peering.set_origin(self.leases.holder)
        if self.leases.shared:
            with contextlib.suppress(Exception):  # the lease loop tries again every second
                await self._renew_leases()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.tokens.sync_shared)
            self._tasks.append(asyncio.create_task(self._share_tokens()))
            self._tasks.append(asyncio.create_task(self._lease_loop()))
            self._tasks.append(asyncio.create_task(self.peering.run()))
        else:
            self._apply_leases(set(self.leases.held), set())
        for key, backend in self.backends.items():
            self._tasks.append(asyncio.create_task(self._poll_loop(key, backend)))
        self._tasks.append(asyncio.create_task(self._every(
            self.settings.heartbeat_coalesce_s, self.hub.flush_heartbeats)))
        self._tasks.append(asyncio.create_task(self._every(1.0, self.hub.tick)))
        self.gc_policy.start(collect=False)
        self._tasks.append(asyncio.create_task(self._every(1.0, self._gc_tick)))
        self._tasks.append(asyncio.create_task(self._every(
            min(5.0, self.settings.refusal_interval_s), self.refusals.flush)))
        self._tasks.append(asyncio.create_task(self._recovery_loop()))
        self._tasks.append(asyncio.create_task(self._every(1.0, self._watch_policy)))
        self._tasks.append(asyncio.create_task(self._every(1.0, self._scan_obligations)))
        self._tasks.append(asyncio.create_task(self._every(1.0, self._close_revoked)))
        if self.webhooks.hooks:
            self._tasks.append(asyncio.create_task(self.webhooks.run()))
            self._tasks.append(asyncio.create_task(self._every(
                1.0, self.webhooks.flush_summaries)))
        log.info("irq gateway listening on %s://%s:%d (%d backends)", self.settings.scheme,
                 self.settings.host, self.port, len(self.backends))

    async def stop(self) -> None:
        if self.leases.shared:  # a clean stop: peers take the contexts over at their next round
            for task in self._tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.to_thread(self.leases.release_all), 5)
        pending = {t for t in self._tasks if not t.done()}
        while pending:
            # cancel again until done: Python 3.11's wait_for can swallow a cancellation that
            # arrives as its inner call completes, and a poll loop would then sleep on forever
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=1.0)
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            self.refusals.flush(force=True)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        for backend in self.backends.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(backend.close(), 5)
        if not self.journal.exclusive:  # a clean stop: peers may adopt what is left at once
            with contextlib.suppress(Exception):
                self.journal.retire()
        self.journal.close()
        self.gc_policy.stop()

    def _gc_tick(self) -> None:
        runs = len(self.hub.runs)
        if runs > 1.5 * self._gc_runs + 10_000:
            self._gc_runs = runs
            self.gc_policy.full()
        else:
            self.gc_policy.tick()

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
                if not started:  # every gateway: commands to the context may come to any
                    await asyncio.wait_for(backend.start(), 30)
                    started = True
                await self._lease_held[key].wait()  # polled only by its leaseholder
                last_ok = self.hub.backends[key].last_ok_at
                obs = await asyncio.wait_for(backend.observe(), 60)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if not self._lease_held[key].is_set():  # the holder reports its health
                    log.warning("starting the adapter of %s (polled by a peer) failed: %s",
                                key, exc)
                    await asyncio.sleep(min(10.0, backend.poll_interval_s * 2 ** min(failures, 4)))
                    continue
                message = exc.message if isinstance(exc, BackendError) else (
                    "timed out" if isinstance(exc, TimeoutError)
                    else f"adapter error: {type(exc).__name__}: {exc}")
                if not isinstance(exc, BackendError | TimeoutError):
                    log.exception("adapter %s failed", key)
                down = BackendHealth(backend=backend.name, context=backend.context, url=url,
                                     reachable=False, last_ok_at=last_ok, error=message)
                self.hub.set_health(down)
                self.peering.health(key, down)
                self._polled[key].set()
                await asyncio.sleep(min(10.0, backend.poll_interval_s * 2 ** min(failures, 4)))
                continue
            failures = 0
            health = BackendHealth(backend=backend.name, context=backend.context, url=url,
                                   reachable=True, last_ok_at=utcnow())
            self.hub.set_health(health)
            self.peering.health(key, health)
            self.hub.observe_runs(obs.runs, obs.gone)
            self.peering.observed(key, obs.runs, obs.gone, obs.interrupts, obs.complete)
            try:  # the journal says which of them are decided already
                self.hub.observe_interrupts(key, obs.interrupts, obs.complete,
                                            self.journal.decision)
            except JournalUnavailable as exc:  # its database is down: poll on, it comes back
                log.warning("reading %s's interrupts: %s", key, exc)
                self._polled[key].set()
                await asyncio.sleep(backend.poll_interval_s)
                continue
            self.executor.unread.discard(key)  # read once: an unknown target is not found
            self._polled[key].set()
            await asyncio.sleep(backend.poll_interval_s)

    # ------------------------------------------------------------ leases and peers

    async def _renew_leases(self) -> None:
        change = await asyncio.to_thread(self.leases.renew)
        self._apply_leases(set(change.taken), set(change.lost))

    async def _lease_loop(self) -> None:
        """Renew, balance and take leases every RENEW_S. A gateway that cannot reach the
        journal keeps polling what it held (observing is idempotent, and with the database
        down no peer can take a lease either: clients keep seeing their backends); its first
        round after the journal is back tells it which of them a peer took meanwhile."""
        started = time.monotonic()
        while True:
            await asyncio.sleep(RENEW_S)
            try:
                await self._renew_leases()
            except Exception as exc:  # one line per 30 s of an outage, not one a second
                if time.monotonic() - self._lease_warned_at >= 30.0:
                    self._lease_warned_at = time.monotonic()
                    log.warning("renewing context leases failed (polling on what this gateway "
                                "held): %s", exc)
            if time.monotonic() - started > 2 * TTL_S:  # a context nobody reported yet
                for key in self.backends:
                    if not self.leases.holds(key):
                        self._context_read(key)

    def _apply_leases(self, taken: set[str], lost: set[str]) -> None:
        for key in taken:
            if self.leases.shared:
                log.info("observing %s (lease taken by %s)", key, self.leases.holder)
            self._lease_held[key].set()
        for key in lost:
            log.info("no longer observing %s (lease held by another gateway)", key)
            self._lease_held[key].clear()
            self.peering.context_lost(key)

    async def _share_tokens(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                await asyncio.to_thread(self.tokens.sync_shared)
            except Exception as exc:
                log.warning("sharing tokens through the journal failed: %s", exc)

    def _context_read(self, key: str) -> None:
        """A context another gateway observes was reported by it (or nobody did in time)."""
        self.executor.unread.discard(key)
        self._polled[key].set()

    def _notify(self, event: dict[str, Any]) -> None:
        if self.peering.notifies(event):
            self.webhooks.observe(event)

    async def _recovery_loop(self) -> None:
        """Re-drive journaled intents without outcome once every backend was polled.

        On a shared journal (PostgreSQL) this gateway also renews its liveness every second
        and keeps looking: the intents of a peer gateway that died (its liveness lapsed) are
        adopted and re-driven within a few seconds (journal ``adopt``: by exactly one)."""
        if self.journal.exclusive:
            await self._redrive_unfinished(until_done=True)
        else:
            await asyncio.gather(self._keep_alive(), self._redrive_unfinished(until_done=False))

    async def _redrive_unfinished(self, *, until_done: bool) -> None:
        await asyncio.gather(*(e.wait() for e in self._polled.values()))
        while True:
            try:
                left = await self.executor.recover()
            except Exception:
                log.exception("recovery failed")
                left = 1
            if left == 0 and until_done:
                return
            await asyncio.sleep(5 if left else ADOPT_INTERVAL_S)

    async def _keep_alive(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.journal.renew_liveness, LIVENESS_TTL_S)
            except Exception:
                log.exception("renewing this gateway's liveness in the journal failed")
            await asyncio.sleep(LIVENESS_RENEW_S)

    # ----------------------------------------------------------- policy and obligations

    def _watch_policy(self) -> None:
        result = self.policy.poll()
        if result is not None:
            self._policy_reloaded(result)

    def _policy_reloaded(self, result: ReloadResult) -> None:
        """A new policy goes to every agent connection and to clients; a refused file is a
        notice (the old policy stays in force)."""
        from websockets.asyncio.server import broadcast

        if result.error is not None:
            log.error("policy not reloaded: %s", result.error)
            self.hub.publish("notice", {"level": "error", "run_id": None, "message":
                                        f"policy not reloaded: {result.error}; policy "
                                        f"{result.version} stays in force"})
        elif result.changed:
            log.info("policy %s loaded from %s", result.version, self.policy.path)
            broadcast(self._agents, dumps(self.policy.agent_frame()))
            self.hub.publish("policy", self.policy.summary())

    def _scan_obligations(self) -> None:
        for ob in self.obligations.mark_overdue(self.hub.clock()):
            due = ob.due_at.isoformat() if ob.due_at else "-"
            self.hub.publish("notice", {
                "level": "warning", "run_id": ob.run_id,
                "message": f"obligation {ob.id} overdue: {ob.what} (rule {ob.rule}, due {due})"})
            self.hub.publish("obligation", ob.model_dump(mode="json"))

    # ------------------------------------------------------------------------ handshake

    def _principal(self, request: Any) -> Principal | None:
        return self.tokens.authenticate(bearer_token(request.headers.get("Authorization")))

    def _process_request(self, connection: Any, request: Any) -> Any:
        path = urlsplit(request.path).path
        if path == "/healthz":
            return connection.respond(HTTPStatus.OK, "ok\n")
        if path not in ("/", "/agent"):
            return connection.respond(HTTPStatus.NOT_FOUND, "unknown path\n")
        principal, why = self.tokens.check(bearer_token(request.headers.get("Authorization")))
        if principal is None:
            body = (f"{why}: this token was {why} (irq token list; irq token create --role R)\n"
                    if why in ("expired", "revoked") else
                    "missing or unknown token (irq token create --role R)\n")
            return self._refuse(connection, path, HTTPStatus.UNAUTHORIZED, why, body)
        if path == "/agent" and principal.role is not Role.AGENT:
            return self._refuse(
                connection, path, HTTPStatus.FORBIDDEN,
                f"role {principal.role.value} ({principal.identity}) on /agent",
                "only agent tokens push heartbeats (irq token create --role agent --scope "
                "BACKEND:CONTEXT); operators act through commands on /\n")
        if path == "/" and principal.role is Role.AGENT:
            return self._refuse(connection, path, HTTPStatus.FORBIDDEN,
                                f"agent token ({principal.identity}) on /",
                                "an agent token cannot connect here\n")
        with contextlib.suppress(OSError, ValueError):  # last use is informative only
            self.tokens.record_use(principal)
        return None

    def _refuse(self, connection: Any, path: str, status: HTTPStatus, reason: str,
                body: str) -> Any:
        peer = connection.remote_address
        host = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        self.counters[f"handshake_{status.value}"] += 1
        self.handshakes.refused_handshake(host, status.value, reason, path)
        return connection.respond(status, body)

    def _audit_refusal(self, entry: AuditEntry) -> None:
        self.journal.audit(entry)
        self.hub.publish("audit", entry.contract())

    async def _handle(self, ws: Any) -> None:
        principal = self._principal(ws.request)
        if principal is None:  # token revoked between handshake and here
            await ws.close(1008, "unauthorized")
            return
        self._open_sessions[ws] = principal
        try:
            if urlsplit(ws.request.path).path == "/agent":
                await self._agent_session(ws, principal)
            else:
                await self._client_session(ws, principal)
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if not isinstance(exc, ConnectionClosed):
                log.exception("session failed")
        finally:
            self._open_sessions.pop(ws, None)

    def _close_revoked(self) -> None:
        """Close, within a second, every open connection whose token was revoked or expired."""
        for ws, who in list(self._open_sessions.items()):
            if not self.tokens.still_valid(who):
                self._open_sessions.pop(ws, None)
                log.info("closing the connection of %s: its token was revoked or expired",
                         who.identity)
                task = asyncio.create_task(ws.close(1008, "token revoked or expired"))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

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
        flt, compact = hello.filter, hello.beats == "compact"
        replay = None
        if hello.since is not None and hello.epoch == self.hub.epoch:
            replay = self.hub.events_since(hello.since)
        if replay is not None:
            # the first frame of the replay now (its replay flag tells the client it is
            # current up to there), the rest through the flusher, in frames shared with
            # the clients that resume from the same place
            replay = replay[:EVENTS_PER_FRAME]
            cursor = replay[-1].seq if replay else self.hub.seq
            first = self._events_frame(replay, flt, compact, replay=True)
        elif hello.snapshot or hello.subscribe:
            cursor, first = await self._snapshot_frame(flt, shared=hello.subscribe)
        else:  # a one-shot client that asks for what it needs
            cursor, first = self.hub.seq, None
        if hello.subscribe:
            sub = Subscriber(wake=wake.set, cursor=cursor, filter=flt, compact_beats=compact)
            self.hub.subscribers.add(sub)
        tasks: set[asyncio.Task[None]] = set()
        budget = TokenBucket(self.settings.client_frames_per_s, self.settings.client_frames_burst)
        slots = asyncio.Semaphore(self.settings.client_inflight)
        try:
            await self._send_large(ws, first)
            if sub is not None:
                if sub.cursor < self.hub.seq:  # the rest of a replay
                    sub.urgent = True
                    wake.set()
                flusher = asyncio.create_task(self._flush(ws, sub, wake))
            async for raw in ws:
                if not (budget.take() and self._client_budget.take(who.identity)):
                    self.counters["client_rate_limited"] += 1
                    self.refusals.refuse(
                        identity=who.identity, role=who.role.value, action="frame", target="",
                        code="rate_limited", detail=f"more than {budget.rate:g} frames/s on one "
                        f"connection or {self._client_budget.rate:g} for the identity")
                    await ws.send(error_frame(
                        "rate_limited", f"over {budget.rate:g} frames/s (burst "
                        f"{budget.burst:g}) on this connection or "
                        f"{self._client_budget.rate:g} for {who.identity}; slow down",
                        _frame_id(raw)))
                    continue
                try:
                    msg = parse_client_frame(raw, self.settings.max_frame_bytes)
                except FrameError as exc:
                    await ws.send(error_frame(exc.code, exc.message, exc.ref))
                    continue
                await slots.acquire()  # at most client_inflight answers at once: backpressure
                task = asyncio.create_task(self._client_message(ws, who, msg))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                task.add_done_callback(lambda _t: slots.release())
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
        """Send a subscriber what the hub published after its cursor: state events within
        ``state_flush_s``, beats batched every ``flush_interval_s``. One send at a time:
        a client that does not read blocks only its own flusher, its cursor stays behind,
        and past ``max_client_lag`` events (or off the log) it gets a fresh snapshot
        instead of the backlog."""
        while True:
            await wake.wait()
            if not sub.urgent:
                # beats wait up to flush_interval_s; a state event published meanwhile cuts
                # the wait short (it waited out the whole interval behind the beats: state
                # changes reached clients ~100 ms late at 20,000 beats/s)
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_until_urgent(sub, wake),
                                           self.settings.flush_interval_s)
            if sub.urgent:
                await asyncio.sleep(self.settings.state_flush_s)
            wake.clear()
            sub.urgent = False
            while True:
                events = self.hub.take(sub, EVENTS_PER_FRAME)
                if events is None:
                    sub.resyncs += 1
                    self.counters["client_resyncs"] += 1
                    sub.cursor, snapshot = await self._snapshot_frame(sub.filter, shared=True)
                    await self._send_large(ws, snapshot)
                    continue
                if not events:
                    break
                frame = self._events_frame(events, sub.filter, sub.compact_beats)
                if frame is not None:
                    await ws.send(frame, text=True)
                if len(events) < EVENTS_PER_FRAME:
                    break

    def _events_frame(self, events: list[Event], flt: SubscriptionFilter | None,
                      compact: bool, *, replay: bool = False) -> bytes | None:
        """One ``events`` frame, built once for every client with the same range, filter
        and beat form (each event itself is encoded once for all); None: nothing to send."""
        if not events:
            return None if not replay else self._join([], replay)
        fkey = flt.key if flt is not None else ""
        key = (events[0].seq, events[-1].seq, fkey, compact)
        if not replay and key in self._frames:
            return self._frames[key]
        parts = [e.compact() if compact else e.full() for e in events
                 if flt is None or flt.admits(e["kind"], e.scope)]
        frame = self._join(parts, replay) if parts or replay else None
        if not replay:
            self._frames[key] = frame
            self._frame_bytes += len(frame or b"")
            while self._frame_bytes > FRAME_CACHE_BYTES or len(self._frames) > 256:
                _key, old = self._frames.popitem(last=False)
                self._frame_bytes -= len(old or b"")
        return frame

    def _join(self, parts: list[bytes], replay: bool) -> bytes:
        head = b'{"type":"events","epoch":"' + self.hub.epoch.encode() + b'",'
        if replay:
            head += b'"replay":true,'
        return head + b'"events":[' + b",".join(parts) + b"]}"

    async def _snapshot_frame(self, flt: SubscriptionFilter | None, *,
                              shared: bool = False) -> tuple[int, bytes]:
        """(seq, encoded snapshot): one encoding serves every client with the same filter
        for SNAPSHOT_REUSE_S while no event happened since, and clients asking while it is
        being built wait for that build (a reconnect storm builds it once). ``shared``: for
        a subscribing client (or a resync), which is sent the events after the snapshot's
        seq anyway: reused for SNAPSHOT_REUSE_S even when events happened since (at 20,000
        beats/s a snapshot is never the newest one)."""
        key = flt.key if flt is not None else ""
        now = time.monotonic()
        cached = self._snapshots.get(key)
        first = self.hub.log[0]["seq"] if self.hub.log else None
        # reused only while nothing happened since it was built: a one-shot client (the CLI)
        # reads the snapshot and leaves, so an older one would show it a past state (an
        # interrupt still pending right after its approval was applied)
        if cached is not None and now - cached[0] < SNAPSHOT_REUSE_S \
                and (shared or cached[1] == self.hub.seq) and lag_decision(
                cached[1], self.hub.seq, first, self.hub.max_lag // 2) != "resync":
            return cached[1], cached[2]
        building = self._building.get(key)
        if building is None:
            building = asyncio.ensure_future(self._build_snapshot(flt))
            self._building[key] = building
            building.add_done_callback(lambda _f: self._building.pop(key, None))
        seq, frame = await asyncio.shield(building)
        self._snapshots[key] = (time.monotonic(), seq, frame)
        for old in [k for k, v in self._snapshots.items()
                    if time.monotonic() - v[0] >= SNAPSHOT_REUSE_S]:
            del self._snapshots[old]
        return seq, frame

    async def _build_snapshot(self, flt: SubscriptionFilter | None) -> tuple[int, bytes]:
        """The snapshot at the current seq, its runs encoded in chunks of SNAPSHOT_CHUNK
        with the event loop let through between them: 100,000 runs take over a second of
        CPU, which must not stop the agents and the other clients. A run changed during the
        build is encoded as it is then; the events after ``seq`` follow anyway."""
        now = self.hub.clock()
        head = self.hub.snapshot(now, flt, with_runs=False)
        runs = self.hub.admitted_runs(flt)
        encoded = encode(head)
        at = encoded.index(b'"runs":[]') + len(b'"runs":[')
        parts: list[bytes] = [encoded[:at]]  # the runs, a comma after each but the last
        turn = time.monotonic()
        for i in range(0, len(runs), SNAPSHOT_CHUNK):
            for r in runs[i:i + SNAPSHOT_CHUNK]:
                parts += (self.hub.contract_bytes(r, now), b",")
            if time.monotonic() - turn >= SNAPSHOT_SLICE_S:
                await asyncio.sleep(0)
                turn = time.monotonic()
        if len(parts) > 1:
            parts.pop()
        parts.append(encoded[at:])
        # one join: the frame is built once (~75 MB at 100,000 runs), not copied again
        return int(head["seq"]), b"".join(parts)

    async def _send_large(self, ws: Any, frame: bytes | None) -> None:
        """A frame; a large one in fragments, so a slow reader holds one fragment in the
        write buffer, not a copy of the whole snapshot."""
        if frame is None:
            return
        if len(frame) <= SNAPSHOT_FRAGMENT:
            await ws.send(frame, text=True)
            return
        view = memoryview(frame)
        await ws.send((view[i:i + SNAPSHOT_FRAGMENT]
                       for i in range(0, len(frame), SNAPSHOT_FRAGMENT)), text=True)

    async def _client_message(self, ws: Any, who: Principal, msg: Any) -> None:
        try:
            if isinstance(msg, Command | PolicyCommand) and not self._command_budget.take(
                    who.identity):
                self.counters["commands_rate_limited"] += 1
                self.refusals.refuse(
                    identity=who.identity, role=who.role.value, action=str(msg.action),
                    target=msg.targets[0], code="rate_limited", reason=msg.reason,
                    items=len(msg.targets), command_id=msg.id,
                    detail=f"more than {self.settings.commands_per_s:g} commands/s")
                raise FrameError(
                    "rate_limited", f"over {self.settings.commands_per_s:g} commands/s (burst "
                    f"{self.settings.commands_burst:g}) for {who.identity}; nothing was done",
                    msg.id)
            if isinstance(msg, Command | PolicyCommand):
                results = (await self.policy_commands.execute(msg, who)
                           if isinstance(msg, PolicyCommand)
                           else await self.executor.execute(msg, who))
                await ws.send(dumps({"type": "result", "id": msg.id,
                                     "results": [r.contract() for r in results]}))
            elif isinstance(msg, Query):
                if msg.what == "notify_test" and who.role != Role.ADMIN:
                    raise FrameError("forbidden", "notify_test needs an admin token", msg.id)
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
        except JournalUnavailable as exc:  # the database is down: the gateway stays up, and
            # the journal's connection is opened again on its next call
            log.warning("handling %s: %s", type(msg).__name__, exc)
            with contextlib.suppress(Exception):
                await ws.send(error_frame("unreachable", JOURNAL_UNAVAILABLE,
                                          getattr(msg, "id", None)))
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if isinstance(exc, ConnectionClosed):
                return
            log.exception("handling %s failed", type(msg).__name__)
            with contextlib.suppress(Exception):
                await ws.send(error_frame("internal", f"{type(exc).__name__}: {exc}",
                                          getattr(msg, "id", None)))

    def _focus(self, run_ids: list[str]) -> None:
        self.hub.focus(run_ids)
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
        if q.what == "runs":
            return self._listing(q, now)
        if q.what == "capabilities":
            return {k: b.capabilities().contract() for k, b in self.backends.items()}
        if q.what == "stats":
            return self.stats()
        if q.what == "notify_test":
            return await self.webhooks.test()
        if q.what == "audit":
            entries = self.journal.audit_entries(
                limit=q.limit, target_prefix=q.target_prefix, since=q.since, until=q.until,
                identity=q.identity, actions=q.actions)
            return [e.contract() for e in entries]
        if q.what in ("policy", "policy_check", "obligations"):
            return answer_policy_query(q, self.policy, self.obligations)
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

    def _listing(self, q: Query, now: Any) -> dict[str, Any]:
        """``irq runs``: the runs' contracts, filtered and sorted here, and the backends'
        health (the CLI warns about unreachable ones) -- not the whole snapshot."""
        runs = listed_runs(self.hub.runs.values(), q.states or (), q.backend, q.expr, now)
        return {"seq": self.hub.seq, "runs": [r.contract(now) for r in runs],
                "backends": [b.contract(now) for b in self.hub.backends.values()]}

    async def _run_detail(self, run: Run, now: Any) -> dict[str, Any]:
        data = run.contract(now)
        backend = self.executor.backend_for(run)
        journal: list[dict[str, Any]] = []
        native_beats: list[dict[str, Any]] = []
        errors: list[str] = []
        self.hub.focus([run.id])  # its pushed beats are kept from now on
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
        pushed = [b.contract() for b in self.hub.heartbeat_history(run.id)]
        data["journal"] = journal
        data["heartbeats"] = native_beats + pushed
        data["interrupts_detail"] = [
            i.contract(now) for i in self.hub.interrupts.values() if i.run_id == run.id
        ]
        data["audit"] = [e.contract() for e in self.journal.audit_entries(
            limit=50, target_prefix=run.id)]
        data["errors"] = errors
        data["policy_decisions"] = self.obligations.decisions(run.id)
        data["obligations"] = [ob.model_dump(mode="json")
                               for ob in self.obligations.listing(run_id=run.id)]
        return data

    def stats(self) -> dict[str, Any]:
        """Counters of what the gateway refused, dropped and holds (``query what=stats``)."""
        return {
            "refused": dict(self.refusals.total),
            "refusal_audit_rows": self.refusals.audited,
            "counters": dict(self.counters),
            "handshakes_refused": self.handshakes.refused,
            "unknown_beats": {"runs": len(self.hub.unknown), "bytes": self.hub.unknown.bytes,
                              "evicted": self.hub.unknown.evicted,
                              "max_runs": self.hub.unknown.max_runs,
                              "max_bytes": self.hub.unknown.max_bytes},
            "stale_beats": self.hub.stale_beats,
            "beats_accepted": self.hub.beats_accepted,
            "client_resyncs": self.counters["client_resyncs"],
            "takeovers": self.hub.takeovers,
            "liveness_backlog": self.hub.liveness_backlog,
            "runs": len(self.hub.runs),
            "notifications": self.webhooks.stats(),
            "peers": {**self.leases.stats(), "events": self.peering.stats()},
        }

    # ------------------------------------------------------------------ agent sessions

    async def _agent_session(self, ws: Any, who: Principal) -> None:
        hello = await self._await_hello(ws, parse_agent_frame)
        if hello is None:
            return
        if who.scopes is None and who.identity not in self._unscoped_warned:
            self._unscoped_warned.add(who.identity)
            log.warning("agent token %r has no scope: it may report for any run of this "
                        "gateway (each run stays bound to the first token that reported it); "
                        "replace it with `irq token create --role agent --scope "
                        "BACKEND:CONTEXT[/PREFIX]`", who.identity)
        reporter = Reporter(who.token_id, who.identity)
        budget = TokenBucket(self.settings.agent_frames_per_s, self.settings.agent_frames_burst)
        told_limited = 0.0
        self._agents.add(ws)  # in the same tick as the frame: a reload cannot fall between
        try:
            await ws.send(dumps(self.policy.agent_frame()))
            await self._agent_frames(ws, who, reporter, budget, told_limited)
        finally:
            self._agents.discard(ws)

    async def _agent_frames(self, ws: Any, who: Principal, reporter: Reporter,
                            budget: TokenBucket, told_limited: float) -> None:
        async for raw in ws:
            cost = 1.0
            if len(raw) > 4096 and (b'"heartbeats"' if isinstance(raw, bytes)
                                    else '"heartbeats"') in raw[:64]:
                cost = max(1.0, len(raw) / BUDGET_BYTES)
            if not (budget.take(cost) and self._agent_budget.take(who.token_id, cost)):
                self.counters["agent_rate_limited"] += 1
                self.refusals.refuse(identity=who.identity, role=who.role.value,
                                     action="heartbeat", target="", code="rate_limited",
                                     detail="over the agent frame budget")
                if time.monotonic() - told_limited >= 1.0:  # one error frame a second
                    told_limited = time.monotonic()
                    await ws.send(error_frame(
                        "rate_limited", f"over {budget.rate:g} frames/s per connection or "
                        f"{self.settings.agent_identity_frames_per_s:g} per token; frames are "
                        "being dropped"))
                continue
            target, action = "", "heartbeat"
            try:
                msg = parse_agent_frame(raw, self.settings.max_frame_bytes)
                if isinstance(msg, AgentHeartbeat):
                    key = self._agent_backend_key(msg)
                    target = f"{key}/{msg.native_id}"
                    beat = check_beat(msg, who, key, self.hub.clock())
                    self.hub.agent_heartbeat(target, beat, reporter, len(raw))
                elif isinstance(msg, AgentHeartbeats):
                    await self._agent_beats(ws, who, reporter, msg, len(raw))
                    # let the clients' flushers and the other agents in: a fast agent's
                    # frames are already buffered, and would be read back to back
                    await asyncio.sleep(0)
                elif isinstance(msg, Ping):
                    await ws.send(dumps({"type": "pong", "id": msg.id}))
                elif isinstance(msg, Hello):
                    raise FrameError("invalid", "hello was already received")
                else:  # a policy_event
                    action = "policy_event"
                    key = self._agent_backend_key(msg)
                    target = f"{key}/{msg.native_id}"
                    self.policy_events.handle(msg, who, key)
            except FrameError as exc:
                self.counters[f"agent_{exc.code}"] += 1
                bound = self.hub.bound_to(target) if exc.code == "bound_to_other" else None
                self.refusals.refuse(  # the audit names the bound token; the agent is not told
                    identity=who.identity, role=who.role.value,
                    action=action,
                    target=target, code=exc.code,
                    detail=exc.message + (f" (bound to {bound.identity})" if bound else ""))
                await ws.send(error_frame(exc.code, exc.message, exc.ref))

    async def _agent_beats(self, ws: Any, who: Principal, reporter: Reporter,
                           msg: AgentHeartbeats, size: int) -> None:
        """A heartbeats frame: each beat accepted or refused on its own, as if it came in
        its own frame; one error frame and one refusal per error code per frame."""
        now = self.hub.clock()
        each = max(1, size // len(msg.beats))
        refused: dict[str, tuple[int, str, str]] = {}  # code -> (count, first message, target)
        keys: dict[tuple[str, str | None], str] = {}  # a batch's beats mostly share theirs
        for item in msg.beats:
            target = ""
            try:
                if isinstance(item, FrameError):
                    raise item
                key = keys.get((item.backend, item.context)) or keys.setdefault(
                    (item.backend, item.context), self._agent_backend_key(item))
                target = f"{key}/{item.native_id}"
                beat = check_beat(item, who, key, now)
                self.hub.agent_heartbeat(target, beat, reporter, each, now)
            except FrameError as exc:
                count, message, first = refused.get(exc.code, (0, exc.message, target))
                refused[exc.code] = (count + 1, message, first)
        for code, (count, message, target) in refused.items():
            self.counters[f"agent_{code}"] += count
            bound = self.hub.bound_to(target) if code == "bound_to_other" else None
            detail = (f"{count} of {len(msg.beats)} beats of a heartbeats frame refused; "
                      f"first: {message}")
            self.refusals.refuse(
                identity=who.identity, role=who.role.value, action="heartbeat",
                target=target, code=code, items=count,
                detail=detail + (f" (bound to {bound.identity})" if bound else ""))
            await ws.send(error_frame(code, detail, msg.id))

    def _agent_run_id(self, beat: AgentHeartbeat) -> str:
        return f"{self._agent_backend_key(beat)}/{beat.native_id}"

    def _agent_backend_key(self, beat: AgentHeartbeat | PolicyEvent) -> str:
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
        return key


async def _until_urgent(sub: Subscriber, wake: asyncio.Event) -> None:
    """Until a state event waits for ``sub`` (each wake of the hub is checked)."""
    while not sub.urgent:
        await wake.wait()
        wake.clear()


def _frame_id(raw: str | bytes) -> str | None:
    """The ``id`` of a frame refused before parsing, when it is cheap to find."""
    if len(raw) > 4096:
        return None
    try:
        data = decode_json(raw)
    except (ValueError, RecursionError):
        return None
    ref = data.get("id") if isinstance(data, dict) else None
    return ref if isinstance(ref, str) and len(ref) <= 128 else None


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
