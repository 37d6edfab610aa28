"""Routing of a client's requests on ``/``: commands to the executor (or the policy
commands), queries answered from the hub, the journal and the backends, focus to the
adapters. One request, one answer frame (``result``, ``answer``, ``pong`` or ``error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from backend_adapters.base import Backend, BackendError
from console.gateway.alert_commands import AlertCommands
from console.gateway.alert_frames import AlertCommand
from console.gateway.auth import Principal
from console.gateway.budgets import IdentityBuckets
from console.gateway.commands import CommandExecutor
from console.gateway.gateway_metrics import GatewayMetrics
from console.gateway.hub import Hub
from console.gateway.job_commands import JobCommands
from console.gateway.job_frames import JobCommand
from console.gateway.journal_store import JournalStore, JournalUnavailable
from console.gateway.obligation_store import ObligationStore
from console.gateway.policy_commands import PolicyCommands
from console.gateway.policy_frames import PolicyCommand
from console.gateway.policy_queries import answer_policy_query
from console.gateway.policy_state import PolicyState
from console.gateway.protocol import (
    Command,
    Focus,
    FrameError,
    Hello,
    Ping,
    Query,
    dumps,
    error_frame,
)
from console.gateway.refusals import RefusalLedger
from console.gateway.release_commands import ReleaseRefusal
from console.gateway.retry_commands import RetryRefusal
from console.gateway.run_listing import listing_frame
from console.gateway.settings import GatewaySettings
from console.gateway.socket import GatewaySocket
from console.gateway.webhooks import Webhooks
from console.model import Action, Role, Run, utcnow
from console.run_filter import listed_runs

log = logging.getLogger("irq.gateway")

#: the answer to a command or query the journal's database could not serve (error code
#: ``unreachable``, exit 6 in the CLI); the database's own message stays in the gateway's log
JOURNAL_UNAVAILABLE = ("the gateway's journal is unavailable: the command was not recorded "
                       "as done; retry with the same idempotency key (it takes effect once)")

#: what a client may send after its hello (protocol.parse_client_frame)
ClientRequest = (Hello | Command | Query | Focus | Ping | PolicyCommand | JobCommand
                 | AlertCommand)
#: the frames that are commands (rate budget, metrics by action and outcome)
COMMANDS = (Command, PolicyCommand, JobCommand, AlertCommand)


class ClientRequests:
    """Answers each request of a client session (one task per request, at most
    ``client_inflight`` at once per connection: client_sessions.py)."""

    def __init__(self, settings: GatewaySettings, hub: Hub, journal: JournalStore,
                 backends: dict[str, Backend], executor: CommandExecutor,
                 policy_commands: PolicyCommands, policy: PolicyState,
                 obligations: ObligationStore, webhooks: Webhooks, refusals: RefusalLedger,
                 counters: Counter[str], stats: Callable[[], dict[str, Any]], *,
                 jobs: JobCommands | None = None,
                 alerts: AlertCommands | None = None,
                 metrics: GatewayMetrics | None = None) -> None:
        """``stats``: the gateway's counters (``query what=stats``), asked per query;
        ``jobs``: durable bulk jobs (job_commands.py; None: refused as unavailable);
        ``alerts``: the alert commands and query (None: this gateway keeps no alerts);
        ``metrics``: command latency and outcomes, frames sent (gateway_metrics.py)."""
        self.settings = settings
        self.hub, self.journal, self.backends = hub, journal, backends
        self.executor, self.policy_commands = executor, policy_commands
        self.policy, self.obligations = policy, obligations
        self.webhooks, self.refusals, self.counters = webhooks, refusals, counters
        self.stats = stats
        self.jobs = jobs
        self.alerts = alerts
        self.metrics = metrics if metrics is not None else GatewayMetrics(enabled=False)
        self.command_budget = IdentityBuckets(settings.commands_per_s, settings.commands_burst)

    async def handle(self, ws: GatewaySocket, who: Principal, msg: ClientRequest) -> None:
        started = time.perf_counter()
        sent = self.metrics.frames.sent
        try:
            if isinstance(msg, COMMANDS) and not (
                    self.command_budget.take(who.identity)):
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
            if isinstance(msg, COMMANDS):
                if isinstance(msg, JobCommand):
                    results = await self._jobs(msg.id).execute(msg, who)
                elif isinstance(msg, PolicyCommand):
                    results = await self.policy_commands.execute(msg, who)
                elif isinstance(msg, AlertCommand):
                    results = await self._alert_command(msg, who)
                else:
                    results = await self.executor.execute(msg, who)
                await ws.send(dumps({"type": "result", "id": msg.id,
                                     "results": [r.contract() for r in results]}))
                sent["result"] += 1
                self.metrics.command_answered(str(msg.action), started,
                                              (r.outcome for r in results))
            elif isinstance(msg, Query):
                if msg.what == "notify_test" and who.role != Role.ADMIN:
                    raise FrameError("forbidden", "notify_test needs an admin token", msg.id)
                if msg.what == "runs":  # the runs' cached contracts, joined (run_listing.py)
                    await ws.send(listing_frame(self.hub, msg, utcnow()), text=True)
                else:
                    data = await self.answer(msg)
                    await ws.send(dumps({"type": "answer", "id": msg.id, "data": data}))
                sent["answer"] += 1
            elif isinstance(msg, Ping):
                await ws.send(dumps({"type": "pong", "id": msg.id}))
                sent["pong"] += 1
            elif isinstance(msg, Hello):
                await ws.send(error_frame("invalid", "hello was already received"))
            else:  # Focus
                self.focus(msg.run_ids)
        except FrameError as exc:
            self._errored(msg, started)
            await ws.send(error_frame(exc.code, exc.message, exc.ref or getattr(msg, "id", None)))
        except JournalUnavailable as exc:  # the database is down: the gateway stays up, and
            # the journal's connection is opened again on its next call
            log.warning("handling %s: %s", type(msg).__name__, exc)
            self._errored(msg, started)
            with contextlib.suppress(Exception):
                await ws.send(error_frame("unreachable", JOURNAL_UNAVAILABLE,
                                          getattr(msg, "id", None)))
        except Exception as exc:
            from websockets.exceptions import ConnectionClosed

            if isinstance(exc, ConnectionClosed):
                return
            log.exception("handling %s failed", type(msg).__name__)
            self._errored(msg, started)
            with contextlib.suppress(Exception):
                await ws.send(error_frame("internal", f"{type(exc).__name__}: {exc}",
                                          getattr(msg, "id", None)))

    def _errored(self, msg: ClientRequest, started: float) -> None:
        """An error frame answers ``msg``: counted, and for a command its latency too."""
        self.metrics.frames.sent["error"] += 1
        if isinstance(msg, COMMANDS):
            self.metrics.command_refused(str(msg.action), started)

    def _jobs(self, ref: str) -> JobCommands:
        if self.jobs is None:
            raise FrameError("unsupported", "this gateway does not run bulk jobs", ref)
        return self.jobs

    async def _alert_command(self, msg: AlertCommand, who: Principal) -> list[Any]:
        if self.alerts is None:
            raise FrameError("not_found", "this gateway keeps no alerts", msg.id)
        return await self.alerts.execute(msg, who)

    def focus(self, run_ids: list[str]) -> None:
        self.hub.focus(run_ids)
        by_backend: dict[str, set[str]] = {}
        for run_id in run_ids:
            head, _, native = run_id.partition("/")
            by_backend.setdefault(head, set()).add(native)
        for key, backend in self.backends.items():
            backend.focus(by_backend.get(key, set()))

    async def answer(self, q: Query) -> Any:
        now = utcnow()
        if q.what == "snapshot":
            return self.hub.snapshot(now)
        if q.what == "runs":
            return self.listing(q, now)
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
        if q.what == "alerts":
            return self.alerts.query(q.include_cleared, q.limit) if self.alerts else []
        if q.what in ("policy", "policy_check", "obligations"):
            return answer_policy_query(q, self.policy, self.obligations)
        if q.what in ("jobs", "job"):
            return await self._jobs(q.id).answer(q)
        if q.what == "plan":
            if q.action is None or not q.targets:
                raise FrameError("invalid", "plan needs 'action' and 'targets'", q.id)
            if q.action is Action.RETRY:
                return await self.retry_plan(q)
            if q.action is Action.RELEASE:
                return self.release_plan(q)
            return self.executor.plan_for(q.action, q.targets).contract()
        # run detail
        if not q.run_id:
            raise FrameError("invalid", "run needs 'run_id'", q.id)
        run = self.hub.run(q.run_id)
        if run is None:
            raise FrameError("not_found", f"no such run: {q.run_id}", q.id)
        return await self.run_detail(run, now)

    def release_plan(self, q: Query) -> dict[str, Any]:
        """A forced release's plan (what will be called), or an error frame naming why
        there is none (no such resource; no release declared for its kind)."""
        assert q.targets is not None
        if len(q.targets) != 1 or not q.resource:
            raise FrameError("invalid", "a release plan is for one run and one 'resource'", q.id)
        planned = self.executor.releases.plan_for(q.targets[0], q.resource)
        if isinstance(planned, ReleaseRefusal):
            raise FrameError(planned.error, planned.detail, q.id)
        return planned.plan.contract()

    async def retry_plan(self, q: Query) -> dict[str, Any]:
        """A retry's plan needs the backend (its steps): one run at a time; a run that cannot
        be retried is an error frame naming why (``conflict`` for a running run: exit 4)."""
        assert q.targets is not None
        if len(q.targets) != 1:
            raise FrameError("invalid", "a retry plan is for one run at a time", q.id)
        planned = await self.executor.retries.plan_for(q.targets[0], q.from_step)
        if isinstance(planned, RetryRefusal):
            raise FrameError(planned.error, planned.detail, q.id)
        return planned.contract()

    def listing(self, q: Query, now: datetime) -> dict[str, Any]:
        """``irq runs``: the runs' contracts, filtered and sorted here, and the backends'
        health (the CLI warns about unreachable ones) -- not the whole snapshot."""
        runs = listed_runs(self.hub.runs.values(), q.states or (), q.backend, q.expr, now)
        return {"seq": self.hub.seq, "runs": [r.contract(now) for r in runs],
                "backends": [b.contract(now) for b in self.hub.backends.values()]}

    async def run_detail(self, run: Run, now: datetime) -> dict[str, Any]:
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
