"""The DBOS adapter: observe and control DBOS workflows through ``DBOSClient``.

Every DBOSClient call is synchronous; they run on a small thread pool owned by the adapter,
with a deadline, so the gateway's event loop never blocks. The pause ledger is only touched
on the event-loop side. Conventions (event keys, attributes, topics) are in ``conventions.py``
and explained in README.md; measured DBOS behaviour in ``docs/backends/dbos.md``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict, TypeVar

from dbos import DBOSClient, WorkflowStatus
from dbos._error import DBOSNonExistentWorkflowError  # only exported from the private module

from backend_adapters.base import (
    ActionOutcome,
    BackendError,
    BackendFactory,
    Capabilities,
    Conflict,
    NotFound,
    Observation,
    PauseLedger,
    Unreachable,
    Unsupported,
)
from backend_adapters.dbos.capabilities import DBOS_CAPABILITIES
from backend_adapters.dbos.conventions import (
    ACTIVE_STATUSES,
    ATTR_INTENT,
    ATTR_REPORT,
    ATTR_RUN,
    ATTR_STEP,
    ATTR_WAITING,
    EVENT_INTERRUPT,
    decision_topic,
)
from backend_adapters.dbos.decisions import refuse_invalid_decision
from backend_adapters.dbos.location import DatabaseLocation, locate
from backend_adapters.dbos.mapping import (
    BACKEND,
    attributes_of,
    intent_of,
    interrupt_from_payload,
    journal_from_steps,
    run_from_status,
)
from backend_adapters.registry import BackendURL
from backend_adapters.run_records import Intent, IntentAction
from console.model import (
    Decision,
    Heartbeat,
    Interrupt,
    JournalStep,
    Run,
)

T = TypeVar("T")


class _ListOptions(TypedDict):
    load_input: bool
    load_output: bool


_LIST: _ListOptions = {"load_input": False, "load_output": False}
#: a cancelled run's agent may report its release this long after the cancel
_SETTLE_S = 600.0


@dataclass
class _Listing:
    """One poll's workflow lists, gathered off the event loop."""

    active: list[WorkflowStatus] = field(default_factory=list)
    finished: list[WorkflowStatus] = field(default_factory=list)
    refreshed: list[WorkflowStatus] = field(default_factory=list)
    cancelled: list[WorkflowStatus] = field(default_factory=list)


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
    ) -> None:
        self.context = context
        self.url = location.display
        self.poll_interval_s = poll_interval_s
        self._location = location
        self._ledger = ledger
        self._lookback_s = lookback_s
        self._finished_limit = finished_limit
        self._rescan_s = rescan_s
        self._call_timeout_s = call_timeout_s
        self._client: DBOSClient | None = None
        self._client_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        # finished workflows seen recently (and paused ones, however old), by workflow id
        self._finished: dict[str, WorkflowStatus] = {}
        self._watermark_ms: int | None = None  # newest completed_at seen
        # interrupt native id -> idempotency key of the decision this adapter sent for it
        self._sent: dict[str, str] = {}
        self._last_rescan = 0.0
        self._reported: dict[str, tuple[str, int | None, str]] = {}  # finished runs told

    # ------------------------------------------------------------------------- plumbing

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self.context, native_id)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=3, thread_name_prefix=f"irq-dbos-{self.context}"
            )
        call = functools.partial(self._guarded, fn, *args, **kwargs)
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(self._pool, call), self._call_timeout_s
            )
        except TimeoutError as exc:
            raise Unreachable(
                f"DBOS system database {self.url} did not answer within {self._call_timeout_s:g}s",
                target=self.url,
            ) from exc

    def _guarded(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` (in a pool thread) turning every database failure into a typed error."""
        try:
            self._location.check_exists()
            return fn(*args, **kwargs)
        except BackendError:
            raise
        except DBOSNonExistentWorkflowError as exc:
            raise NotFound(str(exc), target=self.url) from exc
        except Exception as exc:  # anything from the driver means unreachable
            raise Unreachable(_explain(exc, self.url), target=self.url) from exc

    def _connected(self) -> DBOSClient:
        with self._client_lock:
            if self._client is None:
                client = DBOSClient(
                    system_database_url=self._location.url, retry_connection_errors=False
                )
                try:
                    client.list_workflows(limit=1, **_LIST)  # is it a DBOS system database?
                except Exception:
                    client.destroy()
                    raise
                self._client = client
            return self._client

    # -------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await self._call(self._connected)

    async def close(self) -> None:
        """Drop the client and the threads (a later call reconnects)."""
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(client.destroy), 5.0)
            except Exception:
                pass  # closing: nothing left to report to
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def capabilities(self) -> Capabilities:
        return DBOS_CAPABILITIES

    # ------------------------------------------------------------------------ observation

    def _list_sync(self, since_ms: int, rescan: bool, refresh: list[str]) -> _Listing:
        """(1) the active set; (2) everything finished since the watermark (minus 2 s: DBOS
        stores 1-second timestamps on SQLite); (3) the cached CANCELLED runs whose agent may
        still report (its final report can come minutes after the cancel, and DBOS cannot
        list "changed since"); (4) now and then recent CANCELLED runs, so paused runs older
        than the lookback window stay visible (DBOS cannot filter by attributes on SQLite)."""
        client = self._connected()
        listing = _Listing(
            active=client.list_workflows(status=list(ACTIVE_STATUSES), sort_desc=True, **_LIST)
        )
        since = datetime.fromtimestamp(since_ms / 1000 - 2.0, UTC).isoformat()
        listing.finished = client.list_workflows(
            completed_after=since, limit=self._finished_limit, sort_desc=True, **_LIST
        )
        if refresh:
            listing.refreshed = client.list_workflows(workflow_ids=refresh, **_LIST)
        if rescan:
            listing.cancelled = client.list_workflows(
                status="CANCELLED", limit=self._finished_limit, sort_desc=True, **_LIST
            )
        return listing

    def _events_sync(self, workflow_ids: list[str]) -> dict[str, Any]:
        client = self._connected()
        return {
            wid: client.get_event(wid, EVENT_INTERRUPT, timeout_seconds=0) for wid in workflow_ids
        }

    def _may_have_interrupt(self, status: WorkflowStatus) -> bool:
        """Active and paused runs, skipping those whose agent says it waits on nothing (the
        ``irq.waiting`` hint); runs that do not use irq's helpers are always read."""
        if status.status not in ACTIVE_STATUSES and not self._is_paused(status):
            return False
        attrs = attributes_of(status)
        return not (ATTR_RUN in attrs and ATTR_WAITING in attrs and not attrs.get(ATTR_WAITING))

    def _remember(self, listing: _Listing) -> None:
        for status in [*listing.cancelled, *listing.refreshed, *listing.finished]:
            if status.status not in ACTIVE_STATUSES:
                self._finished[status.workflow_id] = status
        for status in listing.finished:
            completed = status.completed_at or 0
            if completed > (self._watermark_ms or 0):
                self._watermark_ms = completed
        for status in listing.active:
            self._finished.pop(status.workflow_id, None)
        horizon = (time.time() - self._lookback_s) * 1000
        for wid, status in list(self._finished.items()):
            if (status.completed_at or 0) < horizon and not self._is_paused(status):
                self._finished.pop(wid)
                self._reported.pop(wid, None)

    def _settling(self) -> list[str]:
        """Cached CANCELLED runs to re-read: paused ones, and those cancelled recently."""
        recent = (time.time() - _SETTLE_S) * 1000
        return [
            wid
            for wid, status in self._finished.items()
            if status.status == "CANCELLED"
            and ((status.completed_at or 0) >= recent or self._is_paused(status))
        ]

    def _changed(self, status: WorkflowStatus) -> bool:
        """Whether a finished run differs from what the last observation reported (finished
        runs are reported once per change; the gateway keeps what it was told)."""
        key = (
            str(status.status),
            status.updated_at,
            json.dumps(attributes_of(status), sort_keys=True, default=str),
        )
        if self._reported.get(status.workflow_id) == key:
            return False
        self._reported[status.workflow_id] = key
        return True

    def _is_paused(self, status: WorkflowStatus) -> bool:
        """CANCELLED by an irq pause (see :func:`_paused_by_irq`)."""
        if status.status != "CANCELLED":
            return False
        return _paused_by_irq(status, self._ledger.is_paused(self.run_id(status.workflow_id)))

    def _to_run(self, status: WorkflowStatus, event: Any) -> tuple[Run, Interrupt | None]:
        run_id = self.run_id(status.workflow_id)
        interrupt = interrupt_from_payload(event, run_id=run_id)
        run = run_from_status(
            status, context=self.context, paused=self._is_paused(status), interrupt=interrupt
        )
        if event is not None and interrupt is None:
            run.warnings.append(f"malformed {EVENT_INTERRUPT} event: {str(event)[:200]}")
        return run, interrupt

    async def observe(self) -> Observation:
        """Active runs and paused runs every poll; other finished runs when they change."""
        now = time.time()
        since_ms = self._watermark_ms or int((now - self._lookback_s) * 1000)
        rescan = now - self._last_rescan >= self._rescan_s
        listing = await self._call(self._list_sync, since_ms, rescan, self._settling())
        if rescan:
            self._last_rescan = now
        self._remember(listing)
        for status in listing.active:
            self._reported.pop(status.workflow_id, None)
        statuses = [
            *listing.active,
            *(s for s in self._finished.values() if self._is_paused(s) or self._changed(s)),
        ]
        wanted = [s.workflow_id for s in statuses if self._may_have_interrupt(s)]
        events = await self._call(self._events_sync, wanted) if wanted else {}
        observation = Observation()
        for status in statuses:
            run, interrupt = self._to_run(status, events.get(status.workflow_id))
            observation.runs.append(run)
            if interrupt is not None:
                observation.interrupts.append(interrupt)
        return observation

    def _status_sync(self, native_id: str) -> WorkflowStatus:
        found = self._connected().list_workflows(workflow_ids=[native_id], **_LIST)
        if not found:
            raise NotFound(f"no DBOS workflow {native_id!r} in {self.url}", target=native_id)
        return found[0]

    def _run_sync(self, native_id: str) -> tuple[WorkflowStatus, Any]:
        status = self._status_sync(native_id)
        event = None
        if status.status in ACTIVE_STATUSES or status.status == "CANCELLED":
            event = self._connected().get_event(native_id, EVENT_INTERRUPT, timeout_seconds=0)
        return status, event

    async def get_run(self, native_id: str) -> Run:
        status, event = await self._call(self._run_sync, native_id)
        if status.status == "CANCELLED" and not self._is_paused(status):
            event = None  # a cancelled run's leftover interrupt can no longer be decided
        return self._to_run(status, event)[0]

    def _journal_sync(self, native_id: str, ledger_paused: bool) -> list[JournalStep]:
        status = self._status_sync(native_id)
        steps = self._connected().list_workflow_steps(native_id)
        marker = attributes_of(status).get(ATTR_STEP)
        return journal_from_steps(
            steps,
            native=str(status.status),
            marker=marker if isinstance(marker, dict) else None,
            paused=_paused_by_irq(status, ledger_paused),
        )

    async def journal(self, native_id: str) -> list[JournalStep]:
        ledger_paused = self._ledger.is_paused(self.run_id(native_id))
        return await self._call(self._journal_sync, native_id, ledger_paused)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return []  # DBOS keeps none; pushed heartbeats live in the gateway

    def focus(self, native_ids: set[str]) -> None:
        return None  # every poll already reads every active run

    # ---------------------------------------------------------------------------- actions

    def _write_intent(self, native_id: str, action: IntentAction, *, by: str, reason: str) -> None:
        intent: Intent = {
            "action": action,
            "by": by,
            "reason": reason,
            "at": datetime.now(UTC).isoformat(),
        }
        self._connected().update_workflow_attributes(
            native_id, {ATTR_INTENT: dict(intent)}, merge=True
        )

    def _pause_sync(
        self, native_id: str, *, by: str, reason: str, ledger_paused: bool
    ) -> tuple[str, list[str]]:
        status = self._status_sync(native_id)
        native = str(status.status)
        if native == "CANCELLED":
            if _paused_by_irq(status, ledger_paused):
                return "already paused", []
            raise Conflict(f"{native_id} was cancelled: a cancelled run cannot be paused")
        if native not in ACTIVE_STATUSES:
            raise Conflict(f"{native_id} is {native}: only a running run can be paused")
        self._write_intent(native_id, "pause", by=by, reason=reason)
        self._connected().cancel_workflow(native_id)
        after = self._status_sync(native_id)
        if after.status != "CANCELLED":
            raise Conflict(f"{native_id} is {after.status} after cancel_workflow: not paused")
        return (
            "cancel_workflow: DBOS status CANCELLED, recorded by irq as paused; the agent "
            "releases on_pause=release resources when it notices (at its next DBOS call) and "
            "reports them in its final heartbeat",
            ["update_workflow_attributes(irq.intent=pause)", "cancel_workflow"],
        )

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        run_id = self.run_id(native_id)
        detail, operations = await self._call(
            self._pause_sync,
            native_id,
            by=identity,
            reason=reason,
            ledger_paused=self._ledger.is_paused(run_id),
        )
        self._ledger.mark_paused(run_id, True)
        return ActionOutcome(detail=detail, operations=operations)

    def _resume_sync(
        self, native_id: str, *, by: str, reason: str, ledger_paused: bool, lost: bool
    ) -> tuple[str, list[str]]:
        status = self._status_sync(native_id)
        native = str(status.status)
        if native == "CANCELLED":
            if not _paused_by_irq(status, ledger_paused):
                raise Conflict(
                    f"{native_id} was cancelled, which is terminal for irq (DBOS would still "
                    "accept resume_workflow; fork it with DBOS tooling to run it again)"
                )
        elif native == "PENDING":
            if not lost:
                raise Conflict(
                    f"{native_id} is PENDING (executing, or its executor is dead): resuming "
                    "a live run executes its current step twice; resume it only when it is "
                    "lost (no heartbeat)"
                )
        elif native != "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
            raise Conflict(f"{native_id} is {native}: nothing to resume")
        self._write_intent(native_id, "resume", by=by, reason=reason)
        self._connected().resume_workflow(native_id)
        after = self._status_sync(native_id)
        if after.status not in ACTIVE_STATUSES:
            raise Conflict(f"{native_id} is {after.status} after resume_workflow")
        return (
            f"resume_workflow: {native} -> {after.status}; continues from its last journaled "
            "step (journaled steps replay, the step in flight runs again)",
            ["update_workflow_attributes(irq.intent=resume)", "resume_workflow"],
        )

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Resume a paused run. ``lost=True`` also allows a PENDING run whose agent went silent
        (a forced restart: if it is in fact alive its current step runs twice); the gateway
        should pass it only when its unified state for the run is ``lost``."""
        run_id = self.run_id(native_id)
        detail, operations = await self._call(
            self._resume_sync,
            native_id,
            by=identity,
            reason=reason,
            ledger_paused=self._ledger.is_paused(run_id),
            lost=lost,
        )
        self._ledger.mark_paused(run_id, False)
        return ActionOutcome(detail=detail, operations=operations)

    def _cancel_sync(
        self, native_id: str, *, by: str, reason: str, ledger_paused: bool
    ) -> tuple[str, list[str]]:
        client = self._connected()
        status = self._status_sync(native_id)
        native = str(status.status)
        if native in ("SUCCESS", "ERROR"):
            raise Conflict(f"{native_id} is {native}: a finished run cannot be cancelled")
        if native == "CANCELLED":
            if not _paused_by_irq(status, ledger_paused):
                return "already cancelled", []
            self._write_intent(native_id, "cancel", by=by, reason=reason)
            if not _needs_cleanup(attributes_of(status)):
                return (
                    "paused run recorded as cancelled; it kept no resources to release",
                    ["update_workflow_attributes(irq.intent=cancel)"],
                )
            client.resume_workflow(native_id)
            return (
                "paused run resumed once for cleanup (irq.intent=cancel): the agent releases "
                "what it kept while paused (unless on_cancel=keep), reports it, and ends "
                "CANCELLED",
                ["update_workflow_attributes(irq.intent=cancel)", "resume_workflow (cleanup)"],
            )
        self._write_intent(native_id, "cancel", by=by, reason=reason)
        client.cancel_workflow(native_id)
        after = self._status_sync(native_id)
        if after.status != "CANCELLED":
            raise Conflict(f"{native_id} is {after.status} after cancel_workflow: not cancelled")
        return (
            "cancel_workflow: DBOS status CANCELLED (terminal for irq); the agent releases "
            "resources not marked on_cancel=keep when it notices, and reports them",
            ["update_workflow_attributes(irq.intent=cancel)", "cancel_workflow"],
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        run_id = self.run_id(native_id)
        detail, operations = await self._call(
            self._cancel_sync,
            native_id,
            by=identity,
            reason=reason,
            ledger_paused=self._ledger.is_paused(run_id),
        )
        self._ledger.mark_paused(run_id, False)
        return ActionOutcome(detail=detail, operations=operations)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(
            "DBOS has no terminate/kill: cancel_workflow is cooperative (the running step "
            "completes and the agent cleans up). Use cancel, or stop the agent process.",
            target=native_id,
        )

    # --------------------------------------------------------------------------- decisions

    def _decide_sync(
        self, interrupt: Interrupt, message: dict[str, Any], *, ledger_paused: bool
    ) -> str:
        client = self._connected()
        native_id = _workflow_of(interrupt, self.context)
        status = self._status_sync(native_id)
        native = str(status.status)
        live = native in ACTIVE_STATUSES or _paused_by_irq(status, ledger_paused)
        current = client.get_event(native_id, EVENT_INTERRUPT, timeout_seconds=0) if live else None
        current_id = current.get("interrupt_id") if isinstance(current, dict) else None
        if current_id != interrupt.native_id:
            # A retry of a decision the agent already consumed (e.g. re-driven after a gateway
            # crash) is a success, not a conflict: the journal's recv step shows who sent it.
            delivered = self._delivered_sync(native_id, interrupt.native_id)
            if delivered is not None and delivered.get("command_id") == message["command_id"]:
                return (
                    f"already delivered: the agent received this {delivered.get('type')} "
                    "(same command id)"
                )
            if delivered is not None:
                raise Conflict(
                    f"interrupt {interrupt.native_id} was already decided "
                    f"({delivered.get('type')} by {delivered.get('by', '?')})"
                )
        if not live:
            raise Conflict(
                f"interrupt {interrupt.native_id} is no longer pending: the run is {native}"
            )
        if current_id != interrupt.native_id:
            now = f"interrupt {current_id} is pending" if current_id else "no interrupt is pending"
            raise Conflict(
                f"interrupt {interrupt.native_id} is no longer pending ({now}): it was decided, "
                "withdrawn or expired"
            )
        pending: dict[str, Any] = current if isinstance(current, dict) else {}
        allowed = pending.get("allowed_decisions") or ["approve", "reject"]
        refuse_invalid_decision(  # against the interrupt as the agent publishes it now
            message["type"], allowed, args=message.get("args"), schema=pending.get("args_schema")
        )
        client.send(
            native_id,
            message,
            decision_topic(interrupt.native_id),
            interrupt.native_id,  # idempotency key: at most one decision per interrupt
        )
        suffix = " (the run is paused: delivered when it resumes)" if native == "CANCELLED" else ""
        return (
            f"sent {message['type']} on topic {decision_topic(interrupt.native_id)} "
            f"(DBOS idempotency key = interrupt id){suffix}"
        )

    def _delivered_sync(self, native_id: str, interrupt_native_id: str) -> dict[str, Any] | None:
        """The decision message the agent received for this interrupt, from its journal."""
        steps = self._connected().list_workflow_steps(native_id, load_output=True) or []
        for step in steps:
            output = step.get("output")
            if (
                step.get("function_name") == "DBOS.recv"
                and isinstance(output, dict)
                and output.get("interrupt_id") == interrupt_native_id
            ):
                return output
        return None

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        refuse_invalid_decision(
            decision.kind,
            interrupt.allowed_decisions,
            args=decision.args,
            schema=interrupt.args_schema,
            target=interrupt.id,
        )
        earlier = self._sent.get(interrupt.native_id)
        if earlier is not None and earlier != idempotency_key:
            raise Conflict(
                f"a decision for interrupt {interrupt.native_id} was already sent (command "
                f"{earlier}); DBOS delivers at most one decision per interrupt",
                target=interrupt.id,
            )
        message: dict[str, Any] = {
            **decision.payload(),
            "by": identity,
            "interrupt_id": interrupt.native_id,
            "command_id": idempotency_key,
            "decided_at": datetime.now(UTC).isoformat(),
        }
        detail = await self._call(
            self._decide_sync,
            interrupt,
            message,
            ledger_paused=self._ledger.is_paused(interrupt.run_id),
        )
        self._sent[interrupt.native_id] = idempotency_key
        if len(self._sent) > 10_000:
            self._sent.pop(next(iter(self._sent)))
        return ActionOutcome(detail=detail, operations=["get_event(irq.interrupt)", "send"])


# ------------------------------------------------------------------------------ functions


def _paused_by_irq(status: WorkflowStatus, ledger_paused: bool) -> bool:
    """Whether a CANCELLED workflow is paused: the ``irq.intent`` attribute (written by
    whichever gateway acted last, before it cancelled) decides; without one, the ledger."""
    if status.status != "CANCELLED":
        return False
    intent = intent_of(attributes_of(status))
    if intent in ("pause", "cancel"):
        return intent == "pause"
    return ledger_paused


def _workflow_of(interrupt: Interrupt, context: str) -> str:
    prefix = Run.make_id(BACKEND, context, "")
    if interrupt.run_id.startswith(prefix):
        return interrupt.run_id[len(prefix) :]
    raise NotFound(f"interrupt {interrupt.id} does not belong to dbos:{context}")


def _needs_cleanup(attrs: dict[str, Any]) -> bool:
    """Whether a paused run still holds resources that a cancel must release."""
    report = attrs.get(ATTR_REPORT)
    report = report if isinstance(report, dict) else {}
    declared = attrs.get(ATTR_RUN)
    declared = declared if isinstance(declared, dict) else {}
    if not declared:
        return False  # not an irq agent: nothing would honour the cleanup intent
    entries = report.get("resources") or declared.get("resources") or []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("on_cancel") == "keep":
            continue
        if entry.get("state", "held") == "held":
            return True
    return False


def _explain(exc: Exception, url: str) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    if "no such table" in first:
        return f"{url} is not a DBOS system database ({first})"
    if "file is not a database" in first:
        return f"{url} is not a SQLite database ({first})"
    return f"DBOS system database {url} unreachable: {type(exc).__name__}: {first}"[:500]


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
    )


#: the type checker holds ``from_url`` (and so DBOSBackend) to the adapter contract
FACTORY: BackendFactory = from_url
