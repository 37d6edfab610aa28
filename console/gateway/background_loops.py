"""The gateway's loops that no connection drives: a poll loop per backend context, the
context leases and shared tokens (a shared journal), the re-drive of unfinished commands
and this gateway's liveness, and the one-second ticks (hub liveness, policy file,
overdue obligations, revoked tokens, refusal summaries, the collector)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from backend_adapters.base import Backend, BackendError
from console.alert_model import Condition
from console.gateway.auth import TokenStore
from console.gateway.commands import CommandExecutor
from console.gateway.context_leases import RENEW_S, TTL_S, ContextLeases
from console.gateway.gateway_metrics import GatewayMetrics
from console.gateway.heap_release import (
    RELEASE_AFTER_RUNS,
    RELEASE_EVERY_S,
    release_freed_memory,
)
from console.gateway.hub import Hub
from console.gateway.journal_store import JournalStore, JournalUnavailable
from console.gateway.obligation_store import ObligationStore
from console.gateway.peering import Peering
from console.gateway.policy_state import PolicyState, ReloadResult
from console.gateway.refusals import RefusalLedger
from console.gateway.settings import GatewaySettings
from console.gateway.webhooks import Webhooks
from console.gc_policy import GcPolicy
from console.model import BackendHealth, utcnow

log = logging.getLogger("irq.gateway")

# a shared journal: liveness renewed every second, lapsed after a few; orphans looked for
LIVENESS_RENEW_S, LIVENESS_TTL_S, ADOPT_INTERVAL_S = 1.0, 5.0, 1.0


class FirstReads:
    """Which backend contexts were read once since this gateway started. Until a context
    is, an unknown run or interrupt there may just not be read yet, so the executor does
    not answer ``not_found`` for it (``unread`` is the executor's set); and unfinished
    commands are re-driven once every context had its first poll (read or failed)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.unread: set[str] = set(keys)
        self._polled: dict[str, asyncio.Event] = {k: asyncio.Event() for k in self.unread}

    def add(self, key: str) -> None:
        self.unread.add(key)
        self._polled[key] = asyncio.Event()

    def read(self, key: str) -> None:
        """``key`` was read (by this gateway, or reported by the peer observing it)."""
        self.unread.discard(key)
        self._polled[key].set()

    def tried(self, key: str) -> None:
        """A poll of ``key`` failed: it stays unread, and re-driving need not wait for it."""
        self._polled[key].set()

    def untried(self) -> list[str]:
        """The contexts not polled once yet (``/readyz``: http_endpoints.py)."""
        return sorted(k for k, polled in self._polled.items() if not polled.is_set())

    async def all_tried(self) -> None:
        await asyncio.gather(*(e.wait() for e in self._polled.values()))


class BackgroundLoops:
    """Starts the loops (:meth:`start` returns their tasks; the gateway stops them)."""

    def __init__(self, settings: GatewaySettings, hub: Hub, journal: JournalStore,
                 backends: dict[str, Backend], executor: CommandExecutor,
                 first_reads: FirstReads, leases: ContextLeases, peering: Peering,
                 tokens: TokenStore, policy: PolicyState,
                 policy_reloaded: Callable[[ReloadResult], None],
                 obligations: ObligationStore, refusals: RefusalLedger, webhooks: Webhooks,
                 gc_policy: GcPolicy, close_revoked: Callable[[], None],
                 reported: dict[str, list[Condition]] | None = None, *,
                 metrics: GatewayMetrics | None = None) -> None:
        """``policy_reloaded``: told of each change of the policy file (agent_channel.py);
        ``close_revoked``: closes the connections of revoked tokens (connections.py);
        ``reported``: where each context's last poll leaves its backend conditions (the
        alert sources read it: gateway_conditions.py); ``metrics``: where each poll's time
        and failure are counted (gateway_metrics.py)."""
        self.settings, self.hub, self.journal = settings, hub, journal
        self.backends, self.executor, self.first_reads = backends, executor, first_reads
        self.leases, self.peering, self.tokens = leases, peering, tokens
        self.policy, self.policy_reloaded, self.obligations = policy, policy_reloaded, obligations
        self.refusals, self.webhooks = refusals, webhooks
        self.gc_policy, self.close_revoked = gc_policy, close_revoked
        self.reported = reported if reported is not None else {}
        self.metrics = metrics if metrics is not None else GatewayMetrics(enabled=False)
        self._gc_runs = 0  # runs indexed at the last full collection
        self._lease_held: dict[str, asyncio.Event] = {k: asyncio.Event() for k in backends}
        self._lease_warned_at = 0.0

    def add_backend(self, key: str) -> None:
        """One more context (Gateway.add_backend, before :meth:`start`)."""
        self._lease_held[key] = asyncio.Event()

    async def start(self) -> list[asyncio.Task[Any]]:
        loops: list[Coroutine[Any, Any, None]] = []
        if self.leases.shared:
            with contextlib.suppress(Exception):  # the lease loop tries again every second
                await self._renew_leases()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.tokens.sync_shared)
            loops += [self._share_tokens(), self._lease_loop(), self.peering.run()]
        else:
            self._apply_leases(set(self.leases.held), set())
        loops += [self._poll_loop(key, backend) for key, backend in self.backends.items()]
        loops += [self._flush_beats(),
                  self._every(1.0, self.hub.tick)]
        self.gc_policy.start(collect=False)
        loops += [self._every(1.0, self.gc_tick), self._release_heap_loop(),
                  self._every(1.0, self.hub.events.release_encodings),
                  self._every(min(5.0, self.settings.refusal_interval_s), self.refusals.flush),
                  self._recovery_loop(),
                  self._every(1.0, self._watch_policy),
                  self._every(1.0, self._scan_obligations),
                  self._every(1.0, self.close_revoked)]
        if self.webhooks.hooks:
            loops += [self.webhooks.run(), self._every(1.0, self.webhooks.flush_summaries)]
        return [asyncio.create_task(loop) for loop in loops]

    def gc_tick(self) -> None:
        runs = len(self.hub.runs)
        if runs > 1.5 * self._gc_runs + 10_000:
            self._gc_runs = runs
            self.gc_policy.full()
        else:
            self.gc_policy.tick()

    async def _release_heap_loop(self) -> None:
        """A large index churns through run versions, events and snapshots whose freed
        memory glibc keeps (a client's snapshot alone: 75 MB at 100,000 runs): give it back
        every RELEASE_EVERY_S, on a worker thread (``malloc_trim`` walks the heap, 1-11 ms
        at 100,000 runs, without the GIL)."""
        while True:
            await asyncio.sleep(RELEASE_EVERY_S)
            if len(self.hub.runs) >= RELEASE_AFTER_RUNS:
                try:
                    await asyncio.to_thread(release_freed_memory)
                except Exception:  # keep the loop alive
                    log.exception("releasing freed memory failed")

    async def _flush_beats(self) -> None:
        """The agents' beats merged every ``heartbeat_coalesce_s``, in slices (hub.py)."""
        while True:
            await asyncio.sleep(self.settings.heartbeat_coalesce_s)
            try:
                await self.hub.flush_heartbeats_sliced()
            except Exception:  # keep the loop alive; a bug here must not stop the beats
                log.exception("merging heartbeats failed")

    async def _every(self, seconds: float, fn: Callable[[], object]) -> None:
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
            polled_at: float | None = None  # set when observe() is called
            try:
                if not started:  # every gateway: commands to the context may come to any
                    await asyncio.wait_for(backend.start(), 30)
                    started = True
                await self._lease_held[key].wait()  # polled only by its leaseholder
                last_ok = self.hub.backends[key].last_ok_at
                polled_at = time.perf_counter()
                obs = await asyncio.wait_for(backend.observe(), 60)
                took = time.perf_counter() - polled_at
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if not self._lease_held[key].is_set():  # the holder reports its health
                    log.warning("starting the adapter of %s (polled by a peer) failed: %s",
                                key, exc)
                    await asyncio.sleep(min(10.0, backend.poll_interval_s * 2 ** min(failures, 4)))
                    continue
                self.metrics.polled(key, None if polled_at is None
                                    else time.perf_counter() - polled_at, ok=False)
                message = exc.message if isinstance(exc, BackendError) else (
                    "timed out" if isinstance(exc, TimeoutError)
                    else f"adapter error: {type(exc).__name__}: {exc}")
                if not isinstance(exc, BackendError | TimeoutError):
                    log.exception("adapter %s failed", key)
                down = BackendHealth(backend=backend.name, context=backend.context, url=url,
                                     reachable=False, last_ok_at=last_ok, error=message)
                self.hub.set_health(down)
                self.peering.health(key, down)
                self.first_reads.tried(key)
                await asyncio.sleep(min(10.0, backend.poll_interval_s * 2 ** min(failures, 4)))
                continue
            failures = 0
            self.metrics.polled(key, took, ok=True)
            health = BackendHealth(backend=backend.name, context=backend.context, url=url,
                                   reachable=True, last_ok_at=utcnow())
            self.hub.set_health(health)
            self.peering.health(key, health)
            self.peering.observed(key, obs.runs, obs.gone, obs.interrupts, obs.complete)
            many = len(obs.runs) >= RELEASE_AFTER_RUNS
            # each of the adapter's runs is let go once merged, so the index's copies reuse
            # its memory (all 100,000 of a first poll alive until the end left ~120 MB of
            # the allocator's holes between the copies: benchmarks/gateway_scale.py)
            self.hub.observe_runs(consume(obs.runs), obs.gone)
            self.reported[key] = list(obs.conditions)  # the last poll's, for the alerts
            try:  # the journal says which of them are decided already
                self.hub.observe_interrupts(key, obs.interrupts, obs.complete,
                                            self.journal.decision)
            except JournalUnavailable as exc:  # its database is down: poll on, it comes back
                log.warning("reading %s's interrupts: %s", key, exc)
                self.first_reads.tried(key)
                await asyncio.sleep(backend.poll_interval_s)
                continue
            self.first_reads.read(key)  # read once: an unknown target is not found
            del obs  # the rest of the adapter's report goes now, not after the next poll
            if many:  # off the loop, as every RELEASE_EVERY_S
                await asyncio.to_thread(release_freed_memory)
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
                        self.first_reads.read(key)

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

    # ------------------------------------------------------------------- re-drive

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
        await self.first_reads.all_tried()
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
            self.policy_reloaded(result)

    def _scan_obligations(self) -> None:
        for ob in self.obligations.mark_overdue(self.hub.clock()):
            due = ob.due_at.isoformat() if ob.due_at else "-"
            self.hub.publish("notice", {
                "level": "warning", "run_id": ob.run_id,
                "message": f"obligation {ob.id} overdue: {ob.what} (rule {ob.rule}, due {due})"})
            self.hub.publish("obligation", ob.model_dump(mode="json"))


T = TypeVar("T")


def consume(items: list[T]) -> Iterator[T]:
    """``items`` one by one, each dropped from the list as it is handed out (the list is
    empty at the end): what only the list held is freed as it goes."""
    items.reverse()
    while items:
        yield items.pop()
