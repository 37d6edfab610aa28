"""What a gateway process is started with (``irq serve`` flags and the context config)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from console.config import state_dir
from console.gateway.protocol import MAX_FRAME_BYTES
from console.notify_config import NotifySettings
from console.prices import PriceTable


@dataclass
class GatewaySettings:
    host: str = "127.0.0.1"
    port: int = 7433
    backends: list[str] = field(default_factory=list)  # backend URLs (backend_adapters.registry)
    home: Path = field(default_factory=state_dir)  # journal (gateway.db) and tokens.json
    certfile: Path | None = None  # both set: wss://
    keyfile: Path | None = None
    max_frame_bytes: int = MAX_FRAME_BYTES
    flush_interval_s: float = 0.1  # batched deltas to clients (heartbeats)
    state_flush_s: float = 0.01  # a state event (not a beat) reaches clients this soon
    max_client_lag: int = 100_000  # events a client may fall behind before a resync snapshot
    shed_after_s: float = 0.15  # a client this far behind is sent state changes only (0: never)
    shed_hold_s: float = 5.0  # ... until it has been current this long (beat_shedding.py)
    # (the event log's size: a client is resynced when the log no longer reaches back)
    heartbeat_coalesce_s: float = 0.1  # heartbeat flood -> one run event per run per window
    release_verify_s: float = 15.0  # after pause/cancel, wait this long for the agent's report
    event_log_size: int = 100_000  # events kept for resuming clients
    # budgets (token buckets: a sustained rate per second and a burst); see SECURITY.md
    agent_frames_per_s: float = 5_000.0  # per /agent connection
    agent_frames_burst: float = 10_000.0
    agent_identity_frames_per_s: float = 10_000.0  # per agent token, all its connections
    agent_identity_frames_burst: float = 20_000.0
    client_frames_per_s: float = 100.0  # per / connection (queries, pings, focus, commands)
    client_frames_burst: float = 500.0
    client_identity_frames_per_s: float = 300.0  # per client identity, all its connections
    client_identity_frames_burst: float = 1_500.0
    commands_per_s: float = 10.0  # per identity, all its connections
    commands_burst: float = 100.0
    job_rate_per_s: float = 25.0  # a bulk job's targets sent per second unless it names a rate
    client_inflight: int = 32  # requests of one connection being answered at once
    refusal_interval_s: float = 60.0  # refusals of one identity: the first, then one summary
    policy_path: Path | None = None  # irq serve --policy FILE: loaded at start, watched
    notify: NotifySettings = field(default_factory=NotifySettings)  # webhooks (--webhook ...)
    #: irq serve --journal: a postgresql:// URL shared by several gateways; "" is the SQLite
    #: file in ``home`` (one gateway)
    journal: str = ""
    #: this gateway's name in a shared journal (the intents it re-drives after a restart);
    #: "" is HOST:PORT of this machine, stable across restarts of the same gateway
    gateway_id: str = ""
    #: decided approvals and settled obligations leave the journal after this (retention.py)
    retention_s: float = 30 * 86400.0
    #: resource kind -> the command (argv) that releases one (``irq release --force``)
    release_commands: dict[str, list[str]] = field(default_factory=dict)
    #: price per hour by resource kind (``--price gpu=2.50`` over ``[prices]``): the work at
    #: risk of plans, and sent to clients in the welcome (the fleet's cost sort)
    prices: PriceTable = field(default_factory=PriceTable)
    # alerts (console/gateway/alert_evaluator.py): a condition must hold this long to raise
    # an alert, and be gone this long to clear it
    alert_grace_s: float = 5.0
    retrying_after: int = 3  # attempts before a retrying step is an alert
    stalled_after_s: float = 600.0  # fresh beats, progress unmoved this long: stalled
    #: how long a backend context may go unanswered (None: three polls, at least 10 s)
    poll_budget_s: float | None = None
    #: a deadline for interrupts that carry none (irq serve --interrupt-deadline, or the
    #: context's ``interrupt_deadline``); None: none
    interrupt_deadline_s: float | None = None
    #: a paused run keeping an on_pause=keep resource past this raises held_too_long
    held_too_long_after_s: float = 3600.0
    #: ``/metrics`` served (Prometheus; http_endpoints.py), and the bearer token it asks
    #: for ("" for none: anyone who reaches the listener may scrape)
    metrics: bool = True
    metrics_token: str = ""

    @property
    def journal_path(self) -> Path:
        return self.home / "gateway.db"

    @property
    def journal_target(self) -> str | Path:
        """Where the journal is: the ``--journal`` URL, or the SQLite file in ``home``."""
        return self.journal or self.journal_path

    @property
    def owner(self) -> str:
        return self.gateway_id or f"{socket.gethostname()}:{self.port}"

    @property
    def scheme(self) -> str:
        return "wss" if self.certfile and self.keyfile else "ws"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"
