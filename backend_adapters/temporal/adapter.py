"""The Temporal adapter: observe and act on workflows through Temporal's HTTP API (httpx only).

- observe(): one paged visibility list of running workflows (memo + search attributes carry
  irq's pending interrupts), one page of recently closed ones, and describes of pending
  activities under a request budget (``?rps=``), focused and near-deadline runs first;
- failed runs carry their error (``closed_failures.py``), a retrying activity its attempts,
  and task queues nobody polls are ``no_workers`` conditions (``task_queue_pollers.py``);
- retry = a workflow reset to the workflow task before the failed (or a chosen) step
  (``retry.py``, ``reset_points.py``): a new run of the same workflow id;
- pause / resume = pause / unpause every pending activity of the workflow (per-workflow
  activity routes), cancel = request cancellation, terminate = terminate;
- decide() = the ``irq_decide`` update with ``updateId`` = the command's idempotency key;
  a native wait (a workflow blocked in its own code until a signal or an update, issue 22)
  is answered through that signal (``requestId`` from the key) or update (``updateId`` = key).

:class:`TemporalBackend` composes the parts, one module each: ``observer.py`` (a poll, runs,
reads; with ``listing.py``, ``describing.py``, ``visibility.py``), ``actions.py``,
``decision_delivery.py``, ``interrupt_discovery.py``, ``native_waits.py`` and
``native_delivery.py``; they share the HTTP client through
``connection.py`` and what was seen through ``observed_workflows.py``. See ``README.md`` in
this package for the conventions and the state table.
"""

from __future__ import annotations

from backend_adapters.base import (
    ActionOutcome,
    BackendFactory,
    BackendURL,
    Capabilities,
    NotFound,
    Observation,
    PauseLedger,
    Unreachable,
)
from backend_adapters.temporal.actions import WorkflowActions
from backend_adapters.temporal.capabilities import temporal_capabilities
from backend_adapters.temporal.closed_failures import ClosedFailures
from backend_adapters.temporal.config import TemporalConfig
from backend_adapters.temporal.connection import TemporalConnection
from backend_adapters.temporal.decision_delivery import DecisionDelivery
from backend_adapters.temporal.describing import WorkflowDescriber
from backend_adapters.temporal.http_api import TemporalHttp
from backend_adapters.temporal.interrupt_discovery import InterruptDiscovery
from backend_adapters.temporal.listing import WorkflowListing
from backend_adapters.temporal.native_delivery import NativeDelivery
from backend_adapters.temporal.native_waits import NativeWaits
from backend_adapters.temporal.observed_workflows import ObservedWorkflows
from backend_adapters.temporal.observer import TemporalObserver
from backend_adapters.temporal.request_budget import RefreshPlanner, TokenBucket
from backend_adapters.temporal.retry import WorkflowRetry
from backend_adapters.temporal.state_mapping import BACKEND
from backend_adapters.temporal.superseded_runs import SupersededRuns
from backend_adapters.temporal.task_queue_pollers import TaskQueuePollers
from backend_adapters.temporal.visibility import Visibility
from console.model import Decision, Heartbeat, Interrupt, InterruptKind, JournalStep, Run
from console.run_facts import RetryOutcome, RetryPlan


class TemporalBackend:
    """One Temporal namespace as an irq backend context."""

    name = BACKEND

    def __init__(self, config: TemporalConfig, ledger: PauseLedger | None = None) -> None:
        self.config = config
        self.context = config.context
        self.url = config.display_url
        self.poll_interval_s = config.poll_interval_s
        self._ledger = ledger  # unused: Temporal pauses natively
        self.bucket = TokenBucket(
            config.rps, burst=config.rps * max(2.0, 2 * config.poll_interval_s)
        )
        self.planner = RefreshPlanner(near_deadline_s=max(2.0, config.poll_interval_s))
        self.server_version = ""
        observed = ObservedWorkflows()
        self._connection = TemporalConnection(config, observed.mark_dirty)
        visibility = Visibility(self._connection, config, self.bucket)
        self._discovery = InterruptDiscovery(
            self._connection, config, self.bucket, visibility, observed
        )
        self._listing = WorkflowListing(
            config,
            visibility,
            self._discovery,
            observed,
            SupersededRuns(self._connection, self.bucket),
        )
        describer = WorkflowDescriber(self._connection, self.bucket, self.planner, observed)
        self._native = NativeWaits(self._connection, config, self.bucket, self.planner, observed)
        self._observer = TemporalObserver(
            self._connection,
            config,
            self.bucket,
            self.planner,
            observed,
            self._listing,
            describer,
            self._discovery,
            self._native,
            ClosedFailures(self._connection, self.bucket),
            TaskQueuePollers(self._connection, config, self.bucket),
        )
        self._retry = WorkflowRetry(self._connection, observed)
        self._actions = WorkflowActions(self._connection, describer, observed, self._native)
        self._decisions = DecisionDelivery(self._connection, config, observed)
        self._native_decisions = NativeDelivery(self._connection, config, observed, self._native)

    # ------------------------------------------------------------------ lifecycle

    @property
    def http(self) -> TemporalHttp:
        return self._connection.http

    async def start(self) -> None:
        http = self._connection.open()
        info = await http.system_info()
        self.server_version = str(info.get("serverVersion") or "")
        try:
            await http.describe_namespace()
        except NotFound as exc:
            raise Unreachable(
                f"temporal namespace {self.config.namespace!r} not found at {self.url}"
            ) from exc
        await self._discovery.detect_search_attribute()

    async def close(self) -> None:
        await self._native.close()
        await self._connection.close()

    def capabilities(self) -> Capabilities:
        return temporal_capabilities(self.config)

    # ------------------------------------------------------------------ observing

    def focus(self, native_ids: set[str]) -> None:
        self._observer.focus(native_ids)

    @property
    def pending_refresh(self) -> set[str]:
        """Runs to describe first on the next poll (their history moved, or acted upon)."""
        return self._observer.pending_refresh

    @property
    def watched(self) -> set[str]:
        """Runs whose history is being long-polled."""
        return self._observer.watched

    @property
    def truncated(self) -> bool:
        """The last full list stopped at ``max_runs``."""
        return self._listing.truncated

    async def observe(self) -> Observation:
        return await self._observer.observe()

    async def get_run(self, native_id: str) -> Run:
        return await self._observer.get_run(native_id)

    async def journal(self, native_id: str) -> list[JournalStep]:
        return await self._observer.journal(native_id)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return await self._observer.heartbeats(native_id)

    def staleness_s(self) -> list[float]:
        """Seconds since each running workflow's pending activities were last described."""
        return self._observer.staleness_s()

    # ------------------------------------------------------------------ interrupt discovery

    async def list_interrupts(self) -> list[Interrupt]:
        """Every pending interrupt in the namespace (see ``interrupt_discovery.py``), and the
        native waits the last poll found (``native_waits.py``)."""
        return [*await self._discovery.list_interrupts(), *self._native.known_interrupts()]

    @property
    def native_waits(self) -> NativeWaits:
        """Native wait discovery (its ``stats`` count the calls it made)."""
        return self._native

    async def pending_interrupts(self, native_id: str) -> list[Interrupt]:
        """The pending interrupts of one run, from the workflow itself (query; needs a worker)."""
        return await self._discovery.pending_interrupts(native_id)

    # ------------------------------------------------------------------ acting

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.pause(native_id, reason=reason, identity=identity)

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        return await self._actions.resume(native_id, reason=reason, identity=identity, lost=lost)

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.cancel(native_id, reason=reason, identity=identity)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.terminate(native_id, reason=reason, identity=identity)

    # ------------------------------------------------------------------ deciding

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        if interrupt.kind in (InterruptKind.SIGNAL, InterruptKind.UPDATE):
            return await self._native_decisions.decide(
                interrupt, decision, idempotency_key=idempotency_key, identity=identity
            )
        return await self._decisions.decide(
            interrupt, decision, idempotency_key=idempotency_key, identity=identity
        )

    async def retry_plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        return await self._retry.plan(native_id, from_step=from_step)

    async def retry(
        self,
        native_id: str,
        *,
        from_step: str | None,
        request_id: str,
        reason: str,
        identity: str,
    ) -> RetryOutcome:
        return await self._retry.retry(
            native_id,
            from_step=from_step,
            request_id=request_id,
            reason=reason,
            identity=identity,
        )


def from_url(parsed: BackendURL, ledger: PauseLedger) -> TemporalBackend:
    """Registry entry point: ``temporal+http://HOST:HTTP_PORT/NAMESPACE?rps=20``."""
    return TemporalBackend(TemporalConfig.from_url(parsed), ledger)


#: the type checker holds ``from_url`` (and so TemporalBackend) to the adapter contract
FACTORY: BackendFactory = from_url
