"""The Restate adapter: observe invocations through the admin SQL endpoint and control them
through the admin invocation endpoints; decisions resolve awakeables on the ingress (irq's
``irq:interrupt`` convention and plain awakeables) or call a workflow's shared handler that
resolves its promise (``native_waits.py``, ``native_delivery.py``).

``restate+http://ADMIN_HOST:PORT?ingress=http://INGRESS_HOST:PORT`` (``restate+https`` for
TLS); ``header_env=VAR`` / ``header_file=PATH`` send headers such as an auth token, read from
the environment or a file (backend_adapters/url_secrets.py). Measured behaviour in
``docs/backends/restate.md``; conventions in ``conventions.py`` and README.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

from backend_adapters.base import (
    ActionOutcome,
    BackendFactory,
    BackendURL,
    BackendURLError,
    Capabilities,
    Conflict,
    NotFound,
    Observation,
    PauseLedger,
)
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.restate.capabilities import RESTATE_CAPABILITIES
from backend_adapters.restate.conventions import BACKEND, signal_index
from backend_adapters.restate.deployment_health import DeploymentHealth
from backend_adapters.restate.failures import PauseEvent, pause_event
from backend_adapters.restate.http_api import RestateHttp
from backend_adapters.restate.native_delivery import NativeDelivery
from backend_adapters.restate.retry import RestateRetries
from backend_adapters.restate.state_mapping import (
    JournalView,
    interrupt_of,
    read_journal,
    run_from_row,
)
from backend_adapters.url_params import http_target, reject_unknown, take_number
from backend_adapters.url_secrets import take_headers
from console.model import Decision, Heartbeat, Interrupt, InterruptKind, JournalStep, Run
from console.run_facts import RetryOutcome, RetryPlan

DEFAULT_POLL_S = 1.0
#: key irq adds to the decision payload, so a re-driven decision finds its own delivery
COMMAND_KEY = "irq_command_id"

_COLUMNS = (
    "id, target, target_service_name, target_handler_name, target_service_key, status, "
    "created_at, modified_at, completed_at, retry_count, next_retry_at, last_failure, "
    "last_failure_error_code, last_failure_related_command_name, pinned_deployment_id, "
    "last_attempt_deployment_id, completion_result, completion_failure, "
    "suspended_waiting_for_signals, journal_size"
)
_JOURNAL_COLUMNS = "id, index, entry_type, name, entry_json, appended_at"


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class RestateBackend:
    """One Restate server (admin + ingress) as an irq backend context."""

    name = BACKEND

    def __init__(
        self,
        http: RestateHttp,
        ledger: PauseLedger,
        *,
        context: str = "local",
        url: str = "",
        poll_interval_s: float = DEFAULT_POLL_S,
        finished_limit: int = 200,
        verify_s: float = 10.0,
    ) -> None:
        self.context = context
        self.url = url or http.admin_url
        self.poll_interval_s = poll_interval_s
        self._http = http
        self._ledger = ledger
        self._finished_limit = finished_limit
        self._verify_s = verify_s
        self._native = NativeDelivery(http, verify_s=verify_s)
        self._retries = RestateRetries(http, self.get_run, verify_s=verify_s)
        self._health = DeploymentHealth(http, context=context)
        #: invocations irq paused that were seen paused: running again means someone resumed
        #: them (not "pausing"), so irq's pause mark is over
        self._seen_paused: set[str] = set()

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self.context, native_id)

    async def start(self) -> None:
        await self._http.query("SELECT count(*) AS n FROM sys_service")

    async def close(self) -> None:
        await self._health.close()
        await self._http.close()

    def capabilities(self) -> Capabilities:
        return RESTATE_CAPABILITIES

    # ------------------------------------------------------------------------ observation

    async def _services(self) -> dict[str, dict[str, Any]]:
        return {str(s.get("name")): s for s in await self._http.services()}

    async def _journals(self, where: str) -> dict[str, JournalView]:
        rows = await self._http.query(
            f"SELECT {_JOURNAL_COLUMNS} FROM sys_journal WHERE entry_type <> 'Command: Input' "
            f"AND id IN (SELECT id FROM sys_invocation WHERE {where})"
        )
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            grouped.setdefault(str(row.get("id")), []).append(row)
        return {inv: read_journal(items) for inv, items in grouped.items()}

    async def _pause_events(self, where: str) -> dict[str, PauseEvent]:
        """The newest ``Paused`` event of each invocation (why it paused)."""
        rows = await self._http.query(
            "SELECT id, event_type, event_json, appended_at FROM sys_journal_events WHERE "
            f"event_type = 'Paused' AND id IN (SELECT id FROM sys_invocation WHERE {where}) "
            "ORDER BY appended_at"
        )
        return {str(row.get("id")): pause_event(row) for row in rows}

    def _irq_pause(self, inv: str, status: str) -> tuple[bool, bool]:
        """(pause requested and not in effect yet, paused by irq) from the pause ledger."""
        run_id = self.run_id(inv)
        if not self._ledger.is_paused(run_id):
            return False, False
        if status == "paused":
            self._seen_paused.add(inv)
            return False, True
        if status == "running" and inv not in self._seen_paused:
            return True, False
        self._forget_pause(inv)  # resumed, or over
        return False, False

    def _forget_pause(self, inv: str) -> None:
        self._seen_paused.discard(inv)
        if self._ledger.is_paused(self.run_id(inv)):
            self._ledger.mark_paused(self.run_id(inv), False)

    async def _runs(
        self, where: str, *, limit: int | None = None
    ) -> list[tuple[Run, list[Interrupt]]]:
        sql = f"SELECT {_COLUMNS} FROM sys_invocation WHERE {where} ORDER BY modified_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows, journals, pauses, services = await asyncio.gather(
            self._http.query(sql),
            self._journals(f"({where}) AND status <> 'completed'"),
            self._pause_events(f"({where}) AND status = 'paused'"),
            self._services(),
        )
        # a failed invocation's journal says which step failed (only the listed ones)
        failed = [str(r.get("id")) for r in rows if r.get("status") == "completed"
                  and r.get("completion_result") == "failure"
                  and not str(r.get("completion_failure") or "").startswith("[409]")]
        if failed:
            ids = ", ".join(_quote(i) for i in failed)
            journals.update(await self._journals(f"id IN ({ids})"))
        out = []
        for row in rows:
            inv = str(row.get("id"))
            requested, by_irq = self._irq_pause(inv, str(row.get("status") or ""))
            out.append(
                run_from_row(
                    row,
                    context=self.context,
                    journal=journals.get(inv),
                    pause=pauses.get(inv),
                    service=services.get(str(row.get("target_service_name"))),
                    pause_requested=requested,
                    paused_by_irq=by_irq,
                )
            )
        return out

    async def observe(self) -> Observation:
        """Every invocation not completed, plus the latest ``finished_limit`` completed."""
        active, finished = await asyncio.gather(
            self._runs("status <> 'completed'"),
            self._runs("status = 'completed'", limit=self._finished_limit),
        )
        observation = Observation()
        for run, interrupts in [*active, *finished]:
            observation.runs.append(run)
            observation.interrupts.extend(interrupts)
        observation.conditions.extend(await self._health.conditions([r for r, _ in active]))
        return observation

    async def _one(self, native_id: str) -> tuple[Run, list[Interrupt]]:
        found = await self._runs(f"id = {_quote(native_id)}")
        if not found:
            raise NotFound(f"no Restate invocation {native_id!r} on {self.url}", target=native_id)
        return found[0]

    async def get_run(self, native_id: str) -> Run:
        return (await self._one(native_id))[0]

    async def _journal_view(self, native_id: str) -> JournalView:
        rows = await self._http.query(
            f"SELECT {_JOURNAL_COLUMNS} FROM sys_journal WHERE id = {_quote(native_id)} "
            "AND entry_type <> 'Command: Input'"
        )
        return read_journal(rows)

    async def journal(self, native_id: str) -> list[JournalStep]:
        await self._one(native_id)
        return (await self._journal_view(native_id)).steps

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return []  # Restate keeps none; pushed heartbeats live in the gateway

    def focus(self, native_ids: set[str]) -> None:
        return None  # every poll reads every live invocation

    # ---------------------------------------------------------------------------- actions

    async def _status(self, native_id: str) -> str:
        return str((await self._one(native_id))[0].details.get("restate_status", ""))

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        status = await self._status(native_id)
        if status == "suspended":
            raise Conflict(
                f"invocation {native_id} is suspended (nothing runs): Restate cannot pause it",
                target=native_id,
            )
        if status == "paused":
            return ActionOutcome(detail="already paused")
        code, message = await self._http.control(native_id, "pause")
        if code == 409:
            raise Conflict(f"invocation {native_id}: {message}", target=native_id)
        # irq's mark: shown as pausing until the step in flight returns, then paused by an
        # operator, never "given up" (Restate's Paused event looks the same either way)
        self._seen_paused.discard(native_id)
        self._ledger.mark_paused(self.run_id(native_id), True)
        return ActionOutcome(
            detail=(
                "paused"
                if status == "backing-off"
                else "pause requested: effective once the ctx.run in flight returns"
            ),
            operations=[f"PATCH /invocations/{native_id}/pause -> {code}"],
        )

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Retry now. ``lost``: the same call; Restate itself restarts the attempt."""
        status = await self._status(native_id)
        if status == "running" and not lost:
            raise Conflict(f"invocation {native_id} is running: nothing to resume")
        code, message = await self._http.control(native_id, "resume")
        if code == 409:
            raise Conflict(f"invocation {native_id}: {message}", target=native_id)
        self._forget_pause(native_id)
        return ActionOutcome(
            detail=f"resumed from {status}: runs now (completed ctx.run steps are replayed)",
            operations=[f"PATCH /invocations/{native_id}/resume -> {code}"],
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        status = await self._status(native_id)
        code, message = await self._http.control(native_id, "cancel")
        if code == 409:
            raise Conflict(f"invocation {native_id}: {message}", target=native_id)
        self._forget_pause(native_id)
        ops = [f"PATCH /invocations/{native_id}/cancel -> {code}"]
        detail = "cancel delivered: the handler sees TerminalError('cancelled')"
        if status == "backing-off":
            code2, _ = await self._http.control(native_id, "resume")
            ops.append(f"PATCH /invocations/{native_id}/resume -> {code2}")
            detail += " (resumed so it takes effect now, not at the next retry)"
        return ActionOutcome(detail=detail, operations=ops)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        code, message = await self._http.control(native_id, "kill")
        if code == 409:
            raise Conflict(f"invocation {native_id}: {message}", target=native_id)
        self._forget_pause(native_id)
        return ActionOutcome(
            detail="killed: no cleanup ran; a running ctx.run body is not stopped",
            operations=[f"PATCH /invocations/{native_id}/kill -> {code}"],
        )

    # --------------------------------------------------------------------------- decisions

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        refuse_decision(interrupt, decision, target=interrupt.id)
        inv = self._invocation_of(interrupt)
        if interrupt.kind in (InterruptKind.AWAKEABLE, InterruptKind.PROMISE):
            return await self._native.decide(
                inv, interrupt, decision, idempotency_key=idempotency_key
            )
        run, _ = await self._one(inv)
        view = await self._journal_view(inv)
        awakeable = interrupt.native_id
        index = signal_index(awakeable)
        published = next((p for p in view.published if p.get("awakeable_id") == awakeable), None)
        if published is None or index is None:
            raise NotFound(
                f"stale interrupt id {awakeable}: invocation {inv} never published it",
                target=interrupt.id,
            )
        if index in view.signals:
            delivered = view.signals[index]
            if isinstance(delivered, dict) and delivered.get(COMMAND_KEY) == idempotency_key:
                return ActionOutcome(detail=f"already delivered to awakeable {awakeable}")
            kind = delivered.get("type") if isinstance(delivered, dict) else "?"
            raise Conflict(
                f"interrupt {awakeable} was already decided ({kind})", target=interrupt.id
            )
        if run.state.terminal:
            raise Conflict(f"invocation {inv} is {run.state.value}: its interrupt is gone")
        # check again against the interrupt as the journal holds it
        refuse_decision(
            interrupt_of(published, run_id=interrupt.run_id), decision, target=interrupt.id
        )
        payload = {**decision.payload(), COMMAND_KEY: idempotency_key, "by": identity}
        await self._http.resolve_awakeable(awakeable, payload, key=idempotency_key)
        await self._delivered(inv, index)
        return ActionOutcome(
            detail=f"resolved awakeable {awakeable} with {decision.kind.value}",
            operations=[f"POST /restate/awakeables/{awakeable}/resolve"],
        )

    async def _delivered(self, inv: str, index: int) -> None:
        deadline = time.monotonic() + self._verify_s
        while time.monotonic() < deadline:
            if index in (await self._journal_view(inv)).signals:
                return
            await asyncio.sleep(0.1)

    def _invocation_of(self, interrupt: Interrupt) -> str:
        prefix = self.run_id("")
        if interrupt.run_id.startswith(prefix):
            return interrupt.run_id[len(prefix) :]
        raise NotFound(f"interrupt {interrupt.id} does not belong to restate:{self.context}")

    async def retry_plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        """Given up: resume in place from the failing step; failed, cancelled, killed (or
        given up with another step chosen): restart as new from that step (retry.py)."""
        return await self._retries.plan(native_id, from_step)

    async def retry(
        self,
        native_id: str,
        *,
        from_step: str | None,
        request_id: str,
        reason: str,
        identity: str,
    ) -> RetryOutcome:
        outcome = await self._retries.retry(native_id, from_step, request_id)
        self._forget_pause(native_id)
        return outcome


def from_url(parsed: BackendURL, ledger: PauseLedger) -> RestateBackend:
    """``restate+http://ADMIN_HOST:PORT?ingress=http://HOST:PORT``.

    Parameters: ``ingress`` (the ingress URL; default: the admin host on port 8080),
    ``header_env=`` / ``header_file=`` (e.g. an ``authorization`` header), ``timeout``
    (seconds per call, 5), ``finished_limit`` (completed invocations listed, 200),
    ``verify_s`` (how long a decision waits to see its awakeable resolved in the journal)."""
    parts, host = http_target(parsed, BACKEND)
    params = dict(parsed.params)
    headers = take_headers(params)
    admin = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    ingress = params.pop("ingress", None) or f"{parts.scheme}://{host}:8080"
    if urlsplit(ingress).scheme not in ("http", "https"):
        raise BackendURLError(f"restate URL: ingress must be an http(s) URL: {ingress!r}")

    def number(name: str, default: float, minimum: float) -> float:
        return take_number(params, name, default, minimum, backend=BACKEND)

    timeout = number("timeout", 5.0, 0.1)
    finished = int(number("finished_limit", 200, 0))
    verify_s = number("verify_s", 10.0, 0.0)
    reject_unknown(params, backend=BACKEND)
    http = RestateHttp(admin, ingress, headers=headers, timeout_s=timeout)
    return RestateBackend(
        http,
        ledger,
        context=parsed.context,
        url=admin,
        poll_interval_s=parsed.poll_s or DEFAULT_POLL_S,
        finished_limit=finished,
        verify_s=verify_s,
    )


#: the type checker holds ``from_url`` (and so RestateBackend) to the adapter contract
FACTORY: BackendFactory = from_url
