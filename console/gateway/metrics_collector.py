"""The gauges and counters ``/metrics`` reads from the gateway's state at scrape time.

Nothing here runs per event: the gateway keeps its counters where it already counted
(``stats()``: refusals, beats, resyncs, notifications, alerts; frame_counts in
gateway_metrics.py), and this collector turns them into Prometheus families when a scraper
asks. What lives in memory (connections, subscribers' cursors, runs, backends) is read on
the event loop; what lives in the journal (open alerts, bulk jobs) is read beforehand in a
thread by :class:`JournalFacts` (http_endpoints.py awaits :meth:`JournalFacts.refresh`), so
a slow database holds up a scrape, never the loop.

No per-run label anywhere: a label per run would make a series per run (100,000 of them).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from console.gateway.alert_store import AlertStore
from console.gateway.auth import Principal
from console.gateway.gateway_metrics import FrameCounts
from console.gateway.hub import Hub
from console.gateway.job_store import JobStore
from console.gateway.journal_store import JournalStore
from console.model import Role, RunState, utcnow

#: ``stats()["counters"]`` entries with a family of their own (the rest: irq_gateway_counter)
RATE_LIMITED = {"agent_rate_limited": "agent", "client_rate_limited": "client",
                "commands_rate_limited": "command"}
JOBS_LISTED = 1_000  # the newest jobs looked at for the running ones
#: runs counted by state between two turns of the event loop: the census of 100,000 runs
#: took 60-70 ms in one piece (a stall every scrape, seen by every client); in slices of
#: this many, no turn is held more than a few milliseconds
CENSUS_SLICE = 2_000


@dataclass
class JournalReading:
    """What one read of the journal found (``ok`` False: it did not answer)."""

    ok: bool
    error: str = ""
    alerts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, state)
    jobs_running: int = 0
    targets_remaining: int = 0


class JournalFacts:
    """The journal's answers to the scrape's questions: does it answer, which alerts are
    open by kind, which bulk jobs run and how many targets they have left."""

    def __init__(self, journal: JournalStore, alerts: AlertStore, jobs: JobStore) -> None:
        self.journal, self.alerts, self.jobs = journal, alerts, jobs
        self.last = JournalReading(ok=False, error="not read yet")

    def ping(self) -> None:
        """Raises when the journal does not answer (blocking: call it in a thread)."""
        with self.journal.transaction() as tx:
            tx.execute("SELECT 1").fetchone()

    async def refresh(self, timeout_s: float) -> JournalReading:
        """Read the journal in a thread (at most ``timeout_s``) into :attr:`last`, which
        the collector reports."""
        try:
            self.last = await asyncio.wait_for(asyncio.to_thread(self.read), timeout_s)
        except TimeoutError:
            self.last = JournalReading(ok=False, error="timed out")
        return self.last

    def read(self) -> JournalReading:
        """Blocking: call it in a thread. Never raises: a failure is a reading."""
        try:
            self.ping()
            alerts: Counter[tuple[str, str]] = Counter(
                (a.kind, str(a.state)) for a in self.alerts.active())
            running = [j for j in self.jobs.jobs(JOBS_LISTED) if j.state == "running"]
        except Exception as exc:
            return JournalReading(ok=False, error=f"{type(exc).__name__}: {exc}")
        return JournalReading(ok=True, alerts=alerts, jobs_running=len(running),
                              targets_remaining=sum(j.counts.get("pending", 0)
                                                    for j in running))


class GatewayCollector:
    """A prometheus_client collector over one gateway (registered in its registry).

    ``stats``: the gateway's ``stats()`` (the counters it already keeps); ``sessions``: the
    principals of the open connections; ``agents``: how many ``/agent`` connections."""

    def __init__(self, hub: Hub, stats: Callable[[], dict[str, Any]],
                 sessions: Callable[[], Iterable[Principal]], frames: FrameCounts,
                 facts: JournalFacts) -> None:
        self.hub, self.stats, self.sessions = hub, stats, sessions
        self.frames, self.facts = frames, facts
        self.run_states: Counter[RunState] = Counter()  # as of the last :meth:`prepare`

    async def prepare(self, journal_timeout_s: float) -> None:
        """What a scrape reports that takes time to find: the journal's facts (in a
        thread) and the runs by state (on the loop, in slices: CENSUS_SLICE)."""
        await self.facts.refresh(journal_timeout_s)
        runs = list(self.hub.runs.values())  # the index may change between slices
        states: Counter[RunState] = Counter()
        state = attrgetter("state")
        for start in range(0, len(runs), CENSUS_SLICE):
            if start:
                await asyncio.sleep(0)
            states.update(map(state, runs[start:start + CENSUS_SLICE]))
        self.run_states = states

    def collect(self) -> Iterator[Metric]:
        yield from self._connections()
        yield from self._runs()
        yield from self._backends()
        yield from self._counters(self.stats())
        yield from self._frames()
        yield from self._journal(self.facts.last)

    def _connections(self) -> Iterator[Metric]:
        roles = Counter(p.role.value for p in self.sessions())
        conns = GaugeMetricFamily("irq_connections", "Open websocket connections by role "
                                  "(agent: /agent; viewer, operator, admin: /)", labels=["role"])
        for role in Role:
            conns.add_metric([role.value], roles.get(role.value, 0))
        yield conns
        seq = self.hub.seq
        lags = [max(0, seq - sub.cursor) for sub in self.hub.subscribers]
        yield GaugeMetricFamily("irq_subscribers", "Clients subscribed to the event stream",
                                value=len(lags))
        yield GaugeMetricFamily("irq_client_lag_events_max", "Events the furthest-behind "
                                "subscriber has yet to be sent (its queue depth)",
                                value=max(lags, default=0))
        yield GaugeMetricFamily("irq_client_lag_events_sum", "Events all subscribers have "
                                "yet to be sent, summed", value=sum(lags))

    def _runs(self) -> Iterator[Metric]:
        states = self.run_states
        runs = GaugeMetricFamily("irq_runs", "Runs in the gateway's index by state",
                                 labels=["state"])
        for state in RunState:
            runs.add_metric([state.value], states.get(state, 0))
        yield runs
        yield GaugeMetricFamily("irq_interrupts_pending", "Interrupts waiting for a decision",
                                value=len(self.hub.interrupts))
        yield GaugeMetricFamily("irq_liveness_backlog", "Runs whose liveness is due but not "
                                "judged yet (the tick's budget ran out)",
                                value=self.hub.liveness_backlog)
        yield CounterMetricFamily("irq_events_published", "Events published to the event log "
                                  "(every change clients see)", value=self.hub.seq)

    def _backends(self) -> Iterator[Metric]:
        now = utcnow()
        up = GaugeMetricFamily("irq_backend_reachable", "1 when the last poll of the backend "
                               "context succeeded", labels=["backend", "context"])
        age = GaugeMetricFamily("irq_backend_last_ok_age_seconds", "Seconds since the backend "
                                "context last answered a poll (absent before its first)",
                                labels=["backend", "context"])
        for key, health in sorted(self.hub.backends.items()):
            up.add_metric([health.backend, key], 1.0 if health.reachable else 0.0)
            if health.last_ok_at is not None:
                age.add_metric([health.backend, key],
                               max(0.0, (now - health.last_ok_at).total_seconds()))
        yield up
        yield age

    def _counters(self, stats: dict[str, Any]) -> Iterator[Metric]:
        yield CounterMetricFamily("irq_heartbeats_accepted", "Agent heartbeats accepted",
                                  value=stats["beats_accepted"])
        yield CounterMetricFamily("irq_heartbeats_by_hand", "Of the accepted heartbeats, those "
                                  "taken by the plain-beat hand path (the rest cost a model "
                                  "each)", value=stats["beats_by_hand"])
        yield CounterMetricFamily("irq_heartbeats_stale", "Heartbeats older than the run's "
                                  "last one, ignored", value=stats["stale_beats"])
        yield CounterMetricFamily("irq_run_takeovers", "Runs whose beats moved to another "
                                  "agent token", value=stats["takeovers"])
        yield CounterMetricFamily("irq_client_resyncs", "Subscribers that fell too far behind "
                                  "and were sent a snapshot instead of the backlog (updates "
                                  "dropped for them)", value=stats["client_resyncs"])
        yield CounterMetricFamily("irq_updates_shed", "Heartbeat-age updates (beat events) "
                                  "not sent to clients that fell behind: the gateway sheds "
                                  "them before state changes", value=stats["updates_shed"])
        yield GaugeMetricFamily("irq_clients_shedding", "Subscribers being sent state changes "
                                "only because they are behind", value=stats["clients_shedding"])
        unknown = stats["unknown_beats"]
        yield GaugeMetricFamily("irq_unknown_beat_runs", "Runs known only from agent beats "
                                "(no backend reported them yet)", value=unknown["runs"])
        yield CounterMetricFamily("irq_unknown_beats_evicted", "Beats of unknown runs dropped "
                                  "at the memory bound", value=unknown["evicted"])
        refused = CounterMetricFamily("irq_refusals", "Requests refused, by code (forbidden, "
                                      "rate_limited, bound_to_other, ...)", labels=["code"])
        for code, count in sorted(stats["refused"].items()):
            refused.add_metric([code], count)
        yield refused
        yield CounterMetricFamily("irq_handshakes_refused", "Connections refused at the "
                                  "handshake (401, 403)", value=stats["handshakes_refused"])
        limited = CounterMetricFamily("irq_rate_limited", "Frames dropped over a rate budget, "
                                      "by channel", labels=["channel"])
        other = CounterMetricFamily("irq_gateway_counter", "The gateway's other counters "
                                    "(query what=stats: counters), by name", labels=["name"])
        counters: dict[str, int] = stats["counters"]
        for name in RATE_LIMITED:
            limited.add_metric([RATE_LIMITED[name]], counters.get(name, 0))
        for name, count in sorted(counters.items()):
            if name not in RATE_LIMITED and name != "client_resyncs":
                other.add_metric([name], count)
        yield limited
        yield other
        notes = CounterMetricFamily("irq_notifications", "Webhook notifications by outcome",
                                    labels=["outcome"])
        for name, count in sorted(stats["notifications"].items()):
            if name not in ("webhooks", "queue") and isinstance(count, int):
                notes.add_metric([name], count)
        yield notes
        alerts = stats["alerts"]
        yield CounterMetricFamily("irq_alerts_raised", "Alerts this gateway raised",
                                  value=alerts.get("raised", 0))
        yield CounterMetricFamily("irq_alerts_cleared", "Alerts this gateway cleared",
                                  value=alerts.get("cleared", 0))

    def _frames(self) -> Iterator[Metric]:
        received = CounterMetricFamily("irq_frames_received", "Websocket frames received, by "
                                       "channel (client, agent) and type",
                                       labels=["channel", "type"])
        for (channel, kind), count in sorted(self.frames.received.items()):
            received.add_metric([channel, kind], count)
        yield received
        sent = CounterMetricFamily("irq_frames_sent", "Websocket frames sent to clients and "
                                   "agents, by type", labels=["type"])
        for kind, count in sorted(self.frames.sent.items()):
            sent.add_metric([kind], count)
        yield sent

    def _journal(self, reading: JournalReading) -> Iterator[Metric]:
        yield GaugeMetricFamily("irq_journal_up", "1 when the journal answered this scrape",
                                value=1.0 if reading.ok else 0.0)
        alerts = GaugeMetricFamily("irq_alerts_open", "Open and acknowledged alerts, by kind "
                                   "and state", labels=["kind", "state"])
        for (kind, state), count in sorted(reading.alerts.items()):
            alerts.add_metric([kind, state], count)
        yield alerts
        yield GaugeMetricFamily("irq_jobs_running", "Bulk jobs running (any gateway)",
                                value=reading.jobs_running)
        yield GaugeMetricFamily("irq_job_targets_remaining", "Targets the running bulk jobs "
                                "have yet to send", value=reading.targets_remaining)
