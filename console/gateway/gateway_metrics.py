"""What the gateway measures as things happen, for ``/metrics`` (Prometheus).

Two kinds of instruments, chosen by how often they move:

- :class:`FrameCounts`: frames received and sent, by type. These move with every frame (an
  agent's heartbeats frame, a client's events frame), so they are plain ``Counter`` entries
  (one dict increment, no lock); the collector (metrics_collector.py) reads them at scrape
  time, as it reads every gauge.
- :class:`GatewayMetrics`: the histograms and labelled counters of rare events (a command
  answered, a backend polled), observed through prometheus_client where they happen.

One registry per gateway (not the library's global one): tests and benchmarks start several
gateways in one process. ``enabled=False`` (``irq serve --no-metrics``) turns every
observation into a return and ``/metrics`` into a 404: the switch the overhead was measured
with (docs/reliability.md, "Metrics").
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.process_collector import ProcessCollector

from console.gateway.protocol import AgentHeartbeats

#: command received → its outcome sent: a decision on a human's interrupt should take well
#: under a second; a bulk pause of many runs or a release that waits for the agent, seconds
COMMAND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: one backend poll (an adapter's ``observe``): tens of milliseconds to its 60 s timeout
POLL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class FrameCounts:
    """Frames by direction and type: ``received[(channel, type)]`` (channel ``client`` or
    ``agent``) and ``sent[type]``."""

    def __init__(self) -> None:
        self.received: Counter[tuple[str, str]] = Counter()
        self.sent: Counter[str] = Counter()

    def got(self, channel: str, msg: Any) -> None:
        """A frame parsed on ``channel``; its ``type`` field names it."""
        kind = "heartbeats" if isinstance(msg, AgentHeartbeats) else getattr(msg, "type", "other")
        self.received[(channel, kind)] += 1

    def refused(self, channel: str) -> None:
        """A frame that did not parse, or was over the rate budget."""
        self.received[(channel, "refused")] += 1


class GatewayMetrics:
    """The gateway's registry and its event-fed instruments (see the module's doc)."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.registry = CollectorRegistry()
        self.frames = FrameCounts()
        self.command_latency = Histogram(
            "irq_command_latency_seconds",
            "From a client's command frame received to its result frame sent, by action "
            "(action=decide: decision latency)", ["action"], buckets=COMMAND_BUCKETS,
            registry=self.registry)
        self.commands = PromCounter(
            "irq_commands", "Command targets answered, by action and outcome (outcome=error: "
            "the command got an error frame: rate limited, invalid, journal unavailable)",
            ["action", "outcome"], registry=self.registry)
        self.poll_latency = Histogram(
            "irq_backend_poll_seconds", "One poll of a backend context (the adapter's "
            "observe), successful or not", ["context"], buckets=POLL_BUCKETS,
            registry=self.registry)
        self.poll_errors = PromCounter(
            "irq_backend_poll_errors", "Polls of a backend context that failed or timed out",
            ["context"], registry=self.registry)
        if enabled:  # the process's CPU, memory and descriptors (process_* names)
            ProcessCollector(registry=self.registry)

    def command_answered(self, action: str, started: float, outcomes: Iterable[str]) -> None:
        """A command's result was sent; ``started``: ``time.perf_counter()`` at receipt."""
        if not self.enabled:
            return
        self.command_latency.labels(action).observe(time.perf_counter() - started)
        for outcome in outcomes:
            self.commands.labels(action, outcome).inc()

    def command_refused(self, action: str, started: float) -> None:
        """A command was answered with an error frame (nothing was done)."""
        if not self.enabled:
            return
        self.command_latency.labels(action).observe(time.perf_counter() - started)
        self.commands.labels(action, "error").inc()

    def polled(self, context: str, seconds: float | None, *, ok: bool) -> None:
        """One poll of ``context`` (``BACKEND:CONTEXT``) took ``seconds`` (None: it failed
        before the adapter was asked, starting it)."""
        if not self.enabled:
            return
        if seconds is not None:
            self.poll_latency.labels(context).observe(seconds)
        if not ok:
            self.poll_errors.labels(context).inc()
