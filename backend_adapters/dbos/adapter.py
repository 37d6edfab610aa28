"""The DBOS adapter: observe and control DBOS workflows through ``DBOSClient``.

:class:`DBOSBackend` composes the parts, one module each: ``system_database.py`` (the client,
called off the event loop with a deadline), ``observer.py`` (polls, runs, journals),
``actions.py`` (pause / resume / cancel), ``retry.py`` (fork / resume a failed run) and
``decision_delivery.py`` (decide). Conventions (event keys, attributes, topics) are in
``conventions.py`` and explained in README.md;
measured DBOS behaviour in ``docs/backends/dbos.md``.
"""

from __future__ import annotations

from backend_adapters.base import (
    ActionOutcome,
    BackendFactory,
    Capabilities,
    Observation,
    PauseLedger,
)
from backend_adapters.dbos.actions import DBOSActions
from backend_adapters.dbos.capabilities import DBOS_CAPABILITIES
from backend_adapters.dbos.decision_delivery import DBOSDecisionDelivery
from backend_adapters.dbos.location import DatabaseLocation, locate
from backend_adapters.dbos.mapping import BACKEND
from backend_adapters.dbos.native_delivery import NativeMessageDelivery
from backend_adapters.dbos.observer import DBOSObserver
from backend_adapters.dbos.pause_ends import PauseEnds
from backend_adapters.dbos.retry import DBOSRetry
from backend_adapters.dbos.system_database import SystemDatabase
from backend_adapters.registry import BackendURL
from console.model import Decision, Heartbeat, Interrupt, InterruptKind, JournalStep, Run
from console.run_facts import RetryOutcome, RetryPlan


class DBOSBackend:
    """One DBOS system database as an irq backend context."""

    name = "dbos"

    def __init__(
        self,
        location: DatabaseLocation,
        ledger: PauseLedger,
        *,
        context: str = "local",
        poll_interval_s: float = 1.0,
        lookback_s: float = 3600.0,
        finished_limit: int = 200,
        rescan_s: float = 60.0,
        call_timeout_s: float = 15.0,
        no_workers_s: float = 30.0,
    ) -> None:
        self.context = context
        self.url = location.display
        self.poll_interval_s = poll_interval_s
        self._database = SystemDatabase(location, context=context, call_timeout_s=call_timeout_s)
        ends = PauseEnds(ledger, context=context)  # a resume's mark goes once a poll read it
        self._observer = DBOSObserver(
            self._database,
            ledger,
            ends,
            context=context,
            lookback_s=lookback_s,
            finished_limit=finished_limit,
            rescan_s=rescan_s,
            no_workers_s=no_workers_s,
        )
        self._actions = DBOSActions(self._database, ledger, ends, context=context)
        self._decisions = DBOSDecisionDelivery(self._database, ledger, context=context)
        self._messages = NativeMessageDelivery(self._database)
        self._retry = DBOSRetry(self._database)
        self._ledger = ledger

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self.context, native_id)

    # -------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await self._database.call(self._database.connected)

    async def close(self) -> None:
        """Drop the client and the threads (a later call reconnects)."""
        await self._database.close()

    def capabilities(self) -> Capabilities:
        return DBOS_CAPABILITIES

    # ------------------------------------------------------------------------ observation

    async def observe(self) -> Observation:
        """Active runs and paused runs every poll; other finished runs when they change."""
        return await self._observer.observe()

    async def get_run(self, native_id: str) -> Run:
        return await self._observer.get_run(native_id)

    async def journal(self, native_id: str) -> list[JournalStep]:
        return await self._observer.journal(native_id)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return []  # DBOS keeps none; pushed heartbeats live in the gateway

    def focus(self, native_ids: set[str]) -> None:
        return None  # every poll already reads every active run

    # ---------------------------------------------------------------------------- actions

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.pause(native_id, reason=reason, identity=identity)

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Resume a paused run. ``lost=True`` also allows a PENDING run whose agent went silent
        (a forced restart: if it is in fact alive its current step runs twice); the gateway
        should pass it only when its unified state for the run is ``lost``."""
        return await self._actions.resume(native_id, reason=reason, identity=identity, lost=lost)

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.cancel(native_id, reason=reason, identity=identity)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.terminate(native_id, reason=reason, identity=identity)

    # --------------------------------------------------------------------------- decisions

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        """An irq helper's interrupt: ``send`` on its decision topic; a workflow's own recv
        (kind ``message``): the payload sent on the operator's or the workflow's topic."""
        if interrupt.kind is InterruptKind.MESSAGE:
            return await self._messages.decide(
                interrupt,
                decision,
                idempotency_key=idempotency_key,
                ledger_paused=self._ledger.is_paused(interrupt.run_id),
            )
        return await self._decisions.decide(
            interrupt, decision, idempotency_key=idempotency_key, identity=identity
        )

    # ------------------------------------------------------------------------------ retry

    async def retry_plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        """Steps before ``from_step`` (default: the failed one) kept, the rest run again."""
        return await self._retry.plan(
            native_id,
            from_step=from_step,
            ledger_paused=self._ledger.is_paused(self.run_id(native_id)),
        )

    async def retry(
        self,
        native_id: str,
        *,
        from_step: str | None,
        request_id: str,
        reason: str,
        identity: str,
    ) -> RetryOutcome:
        """fork_workflow from the step (a new run), or resume_workflow in place for a run
        DBOS gave up on; once per ``request_id`` (retry.py)."""
        return await self._retry.retry(
            native_id,
            from_step=from_step,
            request_id=request_id,
            reason=reason,
            identity=identity,
            ledger_paused=self._ledger.is_paused(self.run_id(native_id)),
        )


def from_url(parsed: BackendURL, ledger: PauseLedger) -> DBOSBackend:
    params = dict(parsed.params)
    location = locate(parsed.raw, parsed.target, params)

    def number(key: str, default: float) -> float:
        try:
            return float(params.get(key, default))
        except ValueError:
            return default

    return DBOSBackend(
        location,
        ledger,
        context=parsed.context,
        poll_interval_s=parsed.poll_s or 1.0,
        lookback_s=number("lookback_s", 3600.0),
        finished_limit=int(number("finished_limit", 200)),
        rescan_s=number("rescan_s", 60.0),
        call_timeout_s=number("call_timeout_s", 15.0),
        no_workers_s=number("no_workers_s", 30.0),
    )


#: the type checker holds ``from_url`` (and so DBOSBackend) to the adapter contract
FACTORY: BackendFactory = from_url
