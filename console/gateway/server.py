"""The gateway process: adapters, hub, journal and the websockets server (``irq serve``).

Paths: ``/`` for clients (viewer, operator, admin), ``/agent`` for instrumented agents pushing
heartbeats (agent tokens only); ``/healthz``, ``/readyz`` and ``/metrics`` answer plain HTTP
(http_endpoints.py). The bearer token is checked at the handshake: a missing or unknown token
gets HTTP 401, a wrong role 403; both are logged (rate-limited) with the peer. Trust rules
and budgets: SECURITY.md.

This module wires the parts (DESIGN.md §2, "Inside the gateway"), each built with its
collaborators: connections.py (handshake, auth, open connections) hands a connection to
client_sessions.py (hello, first frame, subscription flush; frames encoded once in
shared_frames.py) whose requests client_requests.py routes to the command executor, the
policy commands and the queries; or to agent_channel.py (heartbeats and policy events).
background_loops.py holds the polls, leases, re-drive and one-second ticks.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from backend_adapters.base import Backend
from backend_adapters.registry import BackendURLError, open_backend, parse_backend_url
from console.alert_model import Condition
from console.gateway.agent_channel import AgentChannel
from console.gateway.agent_links import AgentLinks
from console.gateway.alert_commands import AlertCommands
from console.gateway.alert_evaluator import AlertEvaluator, ConditionSource
from console.gateway.alert_store import AlertStore
from console.gateway.approval_store import ApprovalStore
from console.gateway.approval_view import ApprovalView
from console.gateway.auth import TokenStore, tokens_path
from console.gateway.background_loops import BackgroundLoops, FirstReads
from console.gateway.beat_shedding import BeatShedding
from console.gateway.client_requests import ClientRequests
from console.gateway.client_sessions import SERVER_NAME, ClientSessions
from console.gateway.commands import CommandExecutor
from console.gateway.connections import Connections, HandshakeLog
from console.gateway.context_leases import ContextLeases
from console.gateway.default_decisions import DefaultDecisions
from console.gateway.gateway_conditions import GatewayConditions
from console.gateway.gateway_metrics import GatewayMetrics
from console.gateway.http_endpoints import HttpEndpoints
from console.gateway.hub import Hub
from console.gateway.interrupt_deadlines import InterruptDeadlines
from console.gateway.job_commands import JobCommands
from console.gateway.job_driver import JobDriver
from console.gateway.job_store import JobStore
from console.gateway.journal import JournalPauseLedger
from console.gateway.journal_engines import open_journal
from console.gateway.metrics_collector import GatewayCollector, JournalFacts
from console.gateway.obligation_store import ObligationStore
from console.gateway.peering import PeerHub, Peering
from console.gateway.policy_commands import PolicyCommands
from console.gateway.policy_events import PolicyEvents
from console.gateway.policy_state import PolicyState
from console.gateway.refusals import RefusalLedger
from console.gateway.retention import DecidedApprovals, Retention, SettledObligations
from console.gateway.settings import GatewaySettings
from console.gateway.shared_frames import SharedFrames
from console.gateway.shared_tokens import SharedTokens
from console.gateway.webhooks import Webhooks
from console.gc_policy import GcPolicy
from console.model import AuditEntry, BackendHealth, utcnow

if TYPE_CHECKING:
    from websockets.asyncio.server import Server

log = logging.getLogger("irq.gateway")

HARD_FRAME_LIMIT = 16 * 1024 * 1024  # beyond this websockets closes with 1009
#: the collector's thresholds: with 100,000 runs indexed, the default (700 allocations) ran a
#: young collection every few beats and a full one (all runs traversed) every few seconds.
#: Since survivors are frozen every second (gc_policy.py) a young collection walks only what
#: was made since the last one, so its pause grows with the threshold while the total does
#: not: 50,000 paused the loop 55-80 ms each second at 20,000 beats/s (the stall watchdog of
#: benchmarks/gateway_scale.py); 10,000 makes five times as many pauses of a fifth
GC_THRESHOLDS = (10_000, 50, 100)
#: how long a thread may hold the interpreter while another waits: the alert sources run on a
#: worker thread, and each time the event loop gave the interpreter up for a socket call it
#: waited up to Python's default 5 ms to get it back (60-70 ms stalls in socket callbacks)
SWITCH_INTERVAL_S = 0.001


class Gateway:
    """Builds the parts, starts and stops them; ``stats`` and ``add_backend``.

    ``fault_hook``: the executor's test-only seam (tests/support/faulty_gateway.py);
    ``condition_sources``: alert condition sources beyond the gateway's own
    (gateway_conditions.py), each a callable returning the conditions that hold now."""

    def __init__(self, settings: GatewaySettings, *,
                 fault_hook: Callable[[str], None] | None = None,
                 condition_sources: list[ConditionSource] | None = None) -> None:
        self.settings = settings
        gc.set_threshold(*GC_THRESHOLDS)
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        #: survivors frozen each second (console/gc_policy.py); a full collection after the
        #: index grew by half (a first poll of 100,000 runs), not at a random later second
        self.gc_policy = GcPolicy(young=0)
        self.policy = PolicyState(settings.policy_path)
        self.policy.load()  # PolicyError (file, rule, key) before anything else is opened
        self.journal = open_journal(settings.journal_target, owner=settings.owner)
        #: four-eyes approvals: what the hub shows of them, what the executor records
        self.approvals = ApprovalView(ApprovalStore(self.journal), lambda: self.policy.engine)
        self.deadlines = InterruptDeadlines(settings.interrupt_deadline_s)
        self.hub: Hub = PeerHub(event_log_size=settings.event_log_size,
                                max_lag=settings.max_client_lag,
                                interrupt_overlay=lambda intr: self.approvals.show(
                                    self.deadlines.apply(intr)))
        self.obligations = ObligationStore(self.journal)
        self.policy_events = PolicyEvents(self.hub, self.obligations)
        self.hub.snapshot_parts["policy"] = self.policy.summary
        self.hub.snapshot_parts["obligations"] = lambda: [
            ob.model_dump(mode="json") for ob in self.obligations.snapshot()]
        self.alerts = AlertStore(self.journal)
        self.hub.snapshot_parts["alerts"] = lambda: [a.contract() for a in self.alerts.snapshot()]
        self.ledger = JournalPauseLedger(self.journal)
        self.tokens = TokenStore(tokens_path(settings.home))
        if not self.journal.exclusive:  # tokens of every gateway on this journal count here
            self.tokens.share(SharedTokens(self.journal, settings.owner).sync)
        self.backends: dict[str, Backend] = self._open_backends(settings.backends)
        #: until each backend's first poll succeeds (background_loops.py)
        self.first_reads = FirstReads(self.backends)
        self.refusals = RefusalLedger(self._audit_refusal,
                                      interval_s=settings.refusal_interval_s)
        #: the agents' connections by token: the executor asks them to release resources
        self.agent_links = AgentLinks()
        self.executor = CommandExecutor(self.hub, self.journal, self.backends,
                                        approvals=self.approvals,
                                        release_verify_s=settings.release_verify_s,
                                        fault_hook=fault_hook, refusals=self.refusals,
                                        unread=self.first_reads.unread,
                                        release_programs=settings.release_commands,
                                        agent_links=self.agent_links,
                                        prices=settings.prices)
        # a shared journal: each backend context polled by one gateway (its leaseholder),
        # what each observes sent to the others (context_leases.py, peering.py)
        self.leases = ContextLeases(self.journal, settings.owner, list(self.backends))
        self.peering = Peering(self.hub, self.journal, self.leases,
                               decided=self.journal.decision,
                               refresh_interrupt=self.executor.refresh_approvals,
                               on_context_read=self.first_reads.read)
        # durable bulk jobs: recorded in the journal, driven by one gateway at a time
        self.job_store = JobStore(self.journal, self.leases.holder)
        self.job_driver = JobDriver(self.hub, self.job_store, self.executor,
                                    ready=self.first_reads.all_tried)
        self.jobs = JobCommands(self.job_store, self.job_driver,
                                default_rate_per_s=settings.job_rate_per_s,
                                audit=self.executor.book.audit)
        self.counters: Counter[str] = Counter()
        #: /metrics: histograms of commands and polls, frames by type (gateway_metrics.py)
        self.metrics = GatewayMetrics(enabled=settings.metrics)
        #: each context's last poll's backend conditions (background_loops.py writes them)
        self.reported_conditions: dict[str, list[Condition]] = {}
        self.alert_evaluator = self._alert_evaluator(settings, condition_sources or [])
        self.agent_channel = AgentChannel(settings, self.hub, self.backends, self.policy,
                                   self.policy_events, self.refusals, self.counters,
                                   self.agent_links, counts=self.metrics.frames)
        self.policy_commands = PolicyCommands(self.hub, self.journal, self.obligations,
                                              self.policy, self.agent_channel.policy_reloaded,
                                              self.refusals)
        self.webhooks = Webhooks(settings.notify, settings.url)
        if self.webhooks.hooks:
            self.hub.listeners.append(self._notify)
        self.connections = self._listener(settings)
        # a rule's default decision past its deadline; settled rows pruned after the retention
        self.default_decisions = DefaultDecisions(
            lambda: list(self.hub.interrupts.values()), self.executor.decisions,
            lambda: self.policy.engine, self.hub.clock)
        self.retention = Retention(
            timedelta(seconds=settings.retention_s),
            [DecidedApprovals(self.journal), SettledObligations(self.journal), self.alerts],
            self.hub.clock)
        self.loops = BackgroundLoops(settings, self.hub, self.journal, self.backends,
                                     self.executor, self.first_reads, self.leases,
                                     self.peering, self.tokens, self.policy,
                                     self.agent_channel.policy_reloaded, self.obligations,
                                     self.refusals, self.webhooks, self.gc_policy,
                                     self.connections.close_revoked,
                                     self.reported_conditions, metrics=self.metrics)
        self._tasks: list[asyncio.Task[Any]] = []
        self._server: Server | None = None
        self.port = settings.port

    def _open_backends(self, urls: list[str]) -> dict[str, Backend]:
        """One adapter per backend URL, each shown ``connecting`` until its first poll."""
        backends: dict[str, Backend] = {}
        for raw in urls:
            parsed = parse_backend_url(raw)
            backend = open_backend(parsed, self.ledger)
            if parsed.poll_s:
                backend.poll_interval_s = parsed.poll_s
            key = f"{backend.name}:{backend.context}"
            if key in backends:
                raise BackendURLError(f"two backends share the context {key!r}; set ?context=")
            backends[key] = backend
            self.hub.set_health(BackendHealth(backend=backend.name, context=backend.context,
                                              url=parsed.display, reachable=False,
                                              error="connecting"))
        return backends

    def _alert_evaluator(self, settings: GatewaySettings,
                         extra: list[ConditionSource]) -> AlertEvaluator:
        """The alert loop over the gateway's own condition sources and ``extra`` ones."""
        self.conditions = GatewayConditions(
            self.hub, self.obligations, self.reported_conditions, self.backends,
            retrying_after=settings.retrying_after, stalled_after_s=settings.stalled_after_s,
            started_at=utcnow(), poll_budget_s=settings.poll_budget_s,
            paused_since=self.ledger.paused_since,
            held_too_long_after_s=settings.held_too_long_after_s,
            price_per_hour=settings.prices.price_of)
        return AlertEvaluator(
            self.alerts, self.conditions.sources() + list(extra),
            publish=self.hub.publish, clock=self.hub.clock, grace_s=settings.alert_grace_s,
            owns=self._owns, raised_by=settings.owner, one_walk=self.conditions.one_walk)

    def _listener(self, settings: GatewaySettings) -> Connections:
        """What answers on the listener: requests routed (client_requests.py), client
        sessions, the handshake, and plain HTTP (``/metrics``, ``/healthz``, ``/readyz``)
        with the collector that reads this gateway's state at each scrape."""
        self.requests = ClientRequests(settings, self.hub, self.journal, self.backends,
                                       self.executor, self.policy_commands, self.policy,
                                       self.obligations, self.webhooks, self.refusals,
                                       self.counters, self.stats, jobs=self.jobs,
                                       alerts=AlertCommands(self.hub, self.journal, self.alerts,
                                                            self.refusals),
                                       metrics=self.metrics)
        self.shedding = BeatShedding(self.hub.events.marks, settings.shed_after_s,
                                     settings.shed_hold_s,
                                     designed_wait_s=settings.flush_interval_s)
        self.clients = ClientSessions(settings, self.hub, SharedFrames(self.hub),
                                      self.requests, self.refusals, self.counters,
                                      self.shedding, counts=self.metrics.frames)
        self.handshakes = HandshakeLog()
        facts = JournalFacts(self.journal, self.alerts, self.job_store)
        collector = None
        if settings.metrics:  # the open connections read through the gateway at each scrape
            collector = GatewayCollector(
                self.hub, self.stats, lambda: self.connections.open_sessions.values(),
                self.metrics.frames, facts)
            self.metrics.registry.register(collector)
        connections = Connections(self.tokens, self.handshakes, self.clients,
                                  self.agent_channel, self.counters,
                                  endpoints=HttpEndpoints(self.metrics, facts, self.hub,
                                                          self.first_reads, collector=collector,
                                                          token=settings.metrics_token))
        return connections

    def add_backend(self, key: str, backend: Backend, url: str = "") -> None:
        """One more backend context, before :meth:`start` (one not built from a URL: the
        benchmarks' synthetic backends); read, leased and polled like the configured ones."""
        if key in self.backends:
            raise BackendURLError(f"two backends share the context {key!r}; set ?context=")
        self.backends[key] = backend  # the executor's, the loops' and the agents' dict too
        self.first_reads.add(key)
        self.loops.add_backend(key)
        self.leases.add_context(key)
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
            self.connections.handle, self.settings.host, self.settings.port,
            process_request=self.connections.process_request, max_size=HARD_FRAME_LIMIT,
            ssl=ssl_ctx, ping_interval=20, ping_timeout=20, close_timeout=2,
            server_header=SERVER_NAME,
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
            self.job_store.holder = self.leases.holder
            self.peering.set_origin(self.leases.holder)
        self._tasks += await self.loops.start()
        self._tasks += [asyncio.create_task(self.default_decisions.run()),
                        asyncio.create_task(self.retention.run()),
                        asyncio.create_task(self.job_driver.run()),
                        asyncio.create_task(self.alert_evaluator.run())]
        log.info("irq gateway listening on %s://%s:%d (%d backends)", self.settings.scheme,
                 self.settings.host, self.port, len(self.backends))

    async def stop(self) -> None:
        if self.leases.shared:  # a clean stop: peers take the contexts over at their next round
            for task in self._tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.to_thread(self.leases.release_all), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.to_thread(self.job_driver.release), 5)
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
            # of them, those taken by the plain-beat hand path (plain_beats.py); the rest
            # cost a model each: agents sending resources every beat, first beats, bindings
            "beats_by_hand": self.hub.plain_beats.taken,
            "client_resyncs": self.counters["client_resyncs"],
            "updates_shed": self.shedding.shed,
            "shedding_episodes": self.shedding.episodes,
            "clients_shedding": sum(1 for s in self.hub.subscribers if s.shedding),
            "takeovers": self.hub.takeovers,
            "liveness_backlog": self.hub.liveness_backlog,
            "runs": len(self.hub.runs),
            "notifications": self.webhooks.stats(),
            "peers": {**self.leases.stats(), "events": self.peering.stats()},
            "alerts": dict(self.alert_evaluator.counters),
        }

    def _owns(self, context_key: str | None) -> bool:
        """Whether this gateway judges alert conditions of ``context_key``: on a shared
        journal, those of the contexts whose lease it holds (one view per condition, so a
        peer that does not see it yet cannot clear it); a condition of no leased context is
        judged by every gateway and raised once all the same (alert_store.py)."""
        if context_key is None or context_key not in self.leases.contexts:
            return True
        return self.leases.holds(context_key)

    def _notify(self, event: dict[str, Any]) -> None:
        if self.peering.notifies(event):
            self.webhooks.observe(event)

    def _audit_refusal(self, entry: AuditEntry) -> None:
        self.journal.audit(entry)
        self.hub.publish("audit", entry.contract())


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
