"""The LangGraph adapter: observe and control threads of a LangGraph Agent Server over HTTP.

``langgraph+http://127.0.0.1:2024`` (``langgraph dev``) or ``langgraph+https://host`` (a
deployment; ``api_key_env=VAR`` / ``api_key_file=PATH`` sends ``x-api-key``). Measured
behaviour in ``docs/backends/langgraph.md``; conventions in ``conventions.py`` and README.md.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from backend_adapters.base import (
    ActionOutcome,
    Backend,
    BackendError,
    BackendFactory,
    BackendURL,
    BackendURLError,
    Capabilities,
    Conflict,
    InvalidInput,
    NotFound,
    Observation,
    PauseLedger,
    Unreachable,
    Unsupported,
)
from backend_adapters.decision_refusal import refuse_decision
from backend_adapters.langgraph.capabilities import LANGGRAPH_CAPABILITIES
from backend_adapters.langgraph.conventions import (
    BACKEND,
    META_BY,
    META_COMMAND,
    META_DECISION,
    META_INTENT,
    META_INTERRUPT,
    Intent,
)
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.interrupt_shapes import (
    ShapeError,
    interrupt_from_value,
    resume_value,
)
from backend_adapters.langgraph.state_mapping import (
    decisions_from_runs,
    intent_of,
    interrupts_of,
    journal_from_history,
    metadata_of,
    pending_interrupts,
    run_from_thread,
)
from backend_adapters.run_records import IntentAction
from backend_adapters.url_params import http_target, reject_unknown, take_number
from backend_adapters.url_secrets import take_headers, take_secret
from console.model import Decision, Heartbeat, Interrupt, JournalStep, Run

DEFAULT_POLL_S = 1.0
#: Agent Server run statuses that still hold the thread
ACTIVE_RUN_STATUSES = ("pending", "running")


class LangGraphBackend:
    """One LangGraph Agent Server as an irq backend context."""

    name = BACKEND

    def __init__(
        self,
        http: AgentServerHttp,
        ledger: PauseLedger,
        *,
        context: str = "local",
        url: str = "",
        poll_interval_s: float = DEFAULT_POLL_S,
        page_size: int = 500,
        finished_limit: int = 200,
        checkpointer: str | None = None,
        verify_s: float = 10.0,
        follow_s: float = 3.0,
    ) -> None:
        self.context = context
        self.url = url or http.base_url
        self.poll_interval_s = poll_interval_s
        self._http = http
        self._ledger = ledger
        self._page_size = page_size
        self._finished_limit = finished_limit
        self._checkpointer = checkpointer
        self._checkpointer_known = checkpointer is not None
        self._verify_s = verify_s
        self._follow_s = follow_s
        # per thread: (updated_at, the thread read in full / its latest run), so threads
        # that need a second read (a stopped or failed thread) are read once per change
        self._full: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]] = {}

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self.context, native_id)

    # -------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if not await self._http.ok():
            raise Unreachable(f"{self.url} answered /ok without ok=true", target=self.url)
        await self._detect_checkpointer()

    async def _detect_checkpointer(self) -> None:
        """The in-memory runtime (``langgraph dev``) reports no database pools in its JSON
        metrics; a deployment on PostgreSQL does. ``checkpointer=`` in the URL overrides."""
        if self._checkpointer_known:
            return
        metrics = await self._http.metrics()
        self._checkpointer = "postgres" if ("postgres" in metrics or "redis" in metrics) else (
            "memory"
        )
        self._checkpointer_known = True

    async def close(self) -> None:
        await self._http.close()

    def capabilities(self) -> Capabilities:
        return LANGGRAPH_CAPABILITIES

    # ------------------------------------------------------------------------ observation

    async def _search_all(self, status: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = await self._http.search_threads(
                status=status, limit=self._page_size, offset=offset
            )
            out.extend(page)
            if len(page) < self._page_size:
                return out
            offset += len(page)

    async def _full_thread(
        self, thread: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The thread with its ``error`` (search cannot select it), and for a failed thread
        its latest run (a poisoned resume carries irq's metadata); cached per update."""
        tid = str(thread["thread_id"])
        stamp = str(thread.get("updated_at") or "")
        cached = self._full.get(tid)
        if cached is not None and cached[0] == stamp:
            return cached[1], cached[2]
        full = await self._http.thread(tid)
        last_run = None
        if full.get("status") == "error":
            runs = await self._http.runs(tid, limit=1)
            last_run = runs[0] if runs else None
        self._full[tid] = (stamp, full, last_run)
        if len(self._full) > 10_000:
            self._full.pop(next(iter(self._full)))
        return full, last_run

    async def _to_run(
        self, thread: dict[str, Any], *, full: bool = False
    ) -> tuple[Run, list[Interrupt]]:
        tid = str(thread["thread_id"])
        run_id = self.run_id(tid)
        last_run = None
        needs_more = thread.get("status") == "error" or (
            thread.get("status") == "interrupted" and not pending_interrupts(thread)
        )
        if needs_more and not full:
            thread, last_run = await self._full_thread(thread)
        elif thread.get("status") == "error":
            runs = await self._http.runs(tid, limit=1)
            last_run = runs[0] if runs else None
        interrupts = interrupts_of(thread, run_id=run_id)
        run = run_from_thread(
            thread,
            context=self.context,
            ledger_paused=self._ledger.is_paused(run_id),
            checkpointer=self._checkpointer,
            interrupts=interrupts,
            last_run=last_run,
        )
        return run, interrupts

    async def observe(self) -> Observation:
        """Every interrupted and busy thread (all pages), plus the latest idle and failed
        threads (``finished_limit`` each). Threads never run (no graph) are skipped."""
        if not self._checkpointer_known:
            await self._detect_checkpointer()
        interrupted, busy, idle, failed = await asyncio.gather(
            self._search_all("interrupted"),
            self._search_all("busy"),
            self._http.search_threads(status="idle", limit=self._finished_limit),
            self._http.search_threads(status="error", limit=self._finished_limit),
        )
        observation = Observation()
        seen: set[str] = set()
        for thread in [*interrupted, *busy, *failed, *idle]:
            tid = str(thread.get("thread_id") or "")
            if not tid or tid in seen or not metadata_of(thread).get("graph_id"):
                continue
            seen.add(tid)
            run, interrupts = await self._to_run(thread)
            observation.runs.append(run)
            observation.interrupts.extend(interrupts)
        return observation

    async def get_run(self, native_id: str) -> Run:
        thread = await self._thread(native_id)
        return (await self._to_run(thread, full=True))[0]

    async def _thread(self, native_id: str) -> dict[str, Any]:
        try:
            return await self._http.thread(native_id)
        except NotFound as exc:
            raise NotFound(
                f"no LangGraph thread {native_id!r} on {self.url}", target=native_id
            ) from exc
        except InvalidInput as exc:  # "Invalid thread ID": not a UUID
            raise NotFound(f"not a LangGraph thread id: {native_id!r}", target=native_id) from exc

    async def journal(self, native_id: str) -> list[JournalStep]:
        thread = await self._thread(native_id)
        history, runs = await asyncio.gather(
            self._http.history(native_id, limit=200), self._http.runs(native_id, limit=100)
        )
        return journal_from_history(history, thread=thread, decided=decisions_from_runs(runs))

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return []  # the Agent Server keeps none; pushed heartbeats live in the gateway

    def focus(self, native_ids: set[str]) -> None:
        return None  # every poll reads every live thread

    # ---------------------------------------------------------------------------- actions

    async def _write_intent(
        self, native_id: str, action: IntentAction, *, by: str, reason: str, run_ids: list[str]
    ) -> None:
        intent: Intent = {
            "action": action,
            "by": by,
            "reason": reason,
            "at": datetime.now(UTC).isoformat(),
            "run_id": ",".join(run_ids),
        }
        await self._http.patch_metadata(native_id, {META_INTENT: dict(intent)})

    async def _active_runs(self, native_id: str) -> list[dict[str, Any]]:
        runs = await self._http.runs(native_id, limit=20)
        return [r for r in runs if r.get("status") in ACTIVE_RUN_STATUSES]

    async def _cancel_runs(self, native_id: str, runs: list[dict[str, Any]]) -> list[str]:
        ops = []
        for run in runs:
            rid = str(run["run_id"])
            try:
                await self._http.cancel_run(native_id, rid, action="interrupt")
            except NotFound:
                continue  # finished meanwhile
            ops.append(f"POST /threads/{native_id}/runs/{rid}/cancel?action=interrupt")
        return ops

    async def _settled(self, native_id: str) -> dict[str, Any]:
        """The thread once it is no longer busy (a cancel takes effect within the server's
        next step), or as it is after ``verify_s``."""
        deadline = time.monotonic() + self._verify_s
        while True:
            thread = await self._http.thread(native_id)
            if thread.get("status") != "busy" or time.monotonic() > deadline:
                return thread
            await asyncio.sleep(0.1)

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        thread = await self._thread(native_id)
        status = thread.get("status")
        intent = intent_of(thread).get("action")
        if status == "interrupted" and not pending_interrupts(thread):
            if intent == "cancel":
                raise Conflict(f"thread {native_id} was cancelled: it cannot be paused")
            self._ledger.mark_paused(self.run_id(native_id), True)
            return ActionOutcome(detail="already stopped (thread interrupted, nothing runs)")
        if status == "interrupted":
            raise Conflict(
                f"thread {native_id} is parked at an interrupt and runs nothing: decide it "
                "or cancel it"
            )
        if status != "busy":
            raise Conflict(f"thread {native_id} is {status}: only a running thread can be paused")
        runs = await self._active_runs(native_id)
        run_ids = [str(r["run_id"]) for r in runs]
        await self._write_intent(native_id, "pause", by=identity, reason=reason, run_ids=run_ids)
        ops = [f"PATCH /threads/{native_id} (irq_intent=pause)"]
        ops += await self._cancel_runs(native_id, runs)
        after = await self._settled(native_id)
        if after.get("status") == "busy":
            raise Conflict(f"thread {native_id} is still busy {self._verify_s:g}s after the cancel")
        self._ledger.mark_paused(self.run_id(native_id), True)
        return ActionOutcome(
            detail=(
                f"cancelled {len(runs)} run(s) with action=interrupt: thread "
                f"{after.get('status')}, checkpoints kept; resume re-runs the node that was in "
                "flight (a synchronous node may still be running its current call)"
            ),
            operations=ops,
        )

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Continue a stopped thread from its checkpoint. ``lost`` changes nothing here: the
        Agent Server itself runs the graph, so a busy thread is never restarted by irq."""
        thread = await self._thread(native_id)
        status = thread.get("status")
        intent = intent_of(thread).get("action")
        if status == "busy":
            raise Conflict(
                f"thread {native_id} is busy: the Agent Server is running it (irq does not "
                "restart a run the server holds; cancel it, then resume)"
            )
        if status != "interrupted" or pending_interrupts(thread):
            raise Conflict(f"thread {native_id} is {status}: nothing to resume")
        if intent == "cancel":
            raise Conflict(f"thread {native_id} was cancelled, which is terminal for irq")
        await self._write_intent(native_id, "resume", by=identity, reason=reason, run_ids=[])
        graph = metadata_of(thread).get("graph_id") or metadata_of(thread).get("assistant_id")
        body = {
            "assistant_id": graph,
            "input": None,
            "multitask_strategy": "reject",
            "metadata": {META_BY: identity},
        }
        created = await self._http.create_run(native_id, body)
        self._ledger.mark_paused(self.run_id(native_id), False)
        return ActionOutcome(
            detail=(
                f"run {created.get('run_id')} continues the thread from its last checkpoint "
                "(the node that was in flight runs again from its start)"
            ),
            operations=[
                f"PATCH /threads/{native_id} (irq_intent=resume)",
                f'POST /threads/{native_id}/runs {{"input": null}}',
            ],
        )

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        thread = await self._thread(native_id)
        status = thread.get("status")
        intent = intent_of(thread).get("action")
        if intent == "cancel" and status != "busy":
            return ActionOutcome(detail="already cancelled")
        if status in ("idle", "error"):
            raise Conflict(f"thread {native_id} is {status}: a finished run cannot be cancelled")
        runs = await self._active_runs(native_id) if status == "busy" else []
        run_ids = [str(r["run_id"]) for r in runs]
        await self._write_intent(native_id, "cancel", by=identity, reason=reason, run_ids=run_ids)
        ops = [f"PATCH /threads/{native_id} (irq_intent=cancel)"]
        self._ledger.mark_paused(self.run_id(native_id), False)
        if status == "busy":
            ops += await self._cancel_runs(native_id, runs)
            await self._settled(native_id)
            detail = (
                f"cancelled {len(runs)} run(s) with action=interrupt (terminal for irq; a "
                "synchronous node may still be running its current call)"
            )
        elif pending_interrupts(thread):
            await self._http.update_state(native_id, {"values": None, "as_node": "__end__"})
            ops.append(f'POST /threads/{native_id}/state {{"values": null, "as_node": "__end__"}}')
            detail = "the pending interrupt(s) resolved without a decision; the thread is done"
        else:
            detail = "the stopped thread is recorded as cancelled (terminal for irq)"
        return ActionOutcome(detail=detail, operations=ops)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(
            "the LangGraph Agent Server has no terminate/kill: a cancel cannot stop a "
            "synchronous node. Use cancel, or restart the server.",
            target=native_id,
        )

    # --------------------------------------------------------------------------- decisions

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        refuse_decision(interrupt, decision, target=interrupt.id)
        tid = self._thread_of(interrupt)
        thread = await self._thread(tid)
        pending = {item["id"]: item for _task, item in pending_interrupts(thread)}
        if interrupt.native_id not in pending and thread.get("status") == "busy":
            # another interrupt's resume is running; the rest come back pending after it
            thread = await self._settled(tid)
            pending = {item["id"]: item for _task, item in pending_interrupts(thread)}
        item = pending.get(interrupt.native_id)
        if item is None:
            return await self._not_pending(tid, thread, interrupt, idempotency_key, pending)
        if intent_of(thread).get("action") == "cancel":
            raise Conflict(f"thread {tid} was cancelled: its interrupt is no longer pending")
        # check again against the interrupt as the thread holds it now, in its own shape
        fresh = interrupt_from_value(
            item.get("value"),
            run_id=interrupt.run_id,
            native_id=interrupt.native_id,
            created_at=interrupt.created_at,
        )
        refuse_decision(fresh, decision, target=interrupt.id)
        try:
            value = resume_value(item.get("value"), decision)
        except ShapeError as exc:
            raise InvalidInput(f"decision refused: {exc}", target=interrupt.id) from exc
        meta = metadata_of(thread)
        body = {
            "assistant_id": meta.get("graph_id") or meta.get("assistant_id"),
            "command": {"resume": {interrupt.native_id: value}},
            "multitask_strategy": "reject",
            "metadata": {
                META_COMMAND: idempotency_key,
                META_INTERRUPT: interrupt.native_id,
                META_DECISION: decision.kind.value,
                META_BY: identity,
            },
        }
        try:
            created = await self._http.create_run(tid, body)
        except Conflict as exc:
            raise Conflict(
                f"thread {tid} is already running a task (another decision or run is in "
                f"progress): nothing sent ({exc.message})",
                target=interrupt.id,
            ) from exc
        rid = str(created.get("run_id") or "")
        ended = await self._follow(tid, rid) if rid else False
        after = await self._consumed(tid, interrupt.native_id)
        detail = (
            f"resumed interrupt {interrupt.native_id} with {decision.kind.value} "
            f"(run {rid}, multitask_strategy=reject)" + _after_resume(after, ended)
        )
        return ActionOutcome(
            detail=detail,
            operations=[
                f"GET /threads/{tid}",
                f"POST /threads/{tid}/runs (command.resume by interrupt id)",
            ],
        )

    async def _follow(self, tid: str, rid: str) -> bool:
        """Follow the resume run on its SSE join stream for up to ``follow_s``: True when the
        stream closed (the run ended or stopped at its next interrupt), False when it is
        still running then (or the stream failed: the decision was delivered either way)."""
        if self._follow_s <= 0:
            return False
        try:
            async with asyncio.timeout(self._follow_s):
                async with self._http.stream(
                    "GET", f"/threads/{tid}/runs/{rid}/stream", timeout_s=self._follow_s + 1
                ) as events:
                    async for _event in events:
                        pass
        except (TimeoutError, BackendError):
            return False
        return True

    async def _consumed(self, tid: str, interrupt_id: str) -> dict[str, Any]:
        """Re-read the thread until the interrupt is no longer pending (a resume by an
        unknown id is accepted silently), within ``verify_s``; the thread as last read."""
        deadline = time.monotonic() + self._verify_s
        while True:
            thread = await self._http.thread(tid)
            ids = {item["id"] for _task, item in pending_interrupts(thread)}
            if interrupt_id not in ids or time.monotonic() > deadline:
                return thread
            await asyncio.sleep(0.1)

    async def _not_pending(
        self,
        tid: str,
        thread: dict[str, Any],
        interrupt: Interrupt,
        key: str,
        pending: dict[str, Any],
    ) -> ActionOutcome:
        """The interrupt is not pending: our own earlier delivery (re-driven after a crash),
        decided by someone else, or an id the thread never had."""
        for run in await self._http.runs(tid, limit=100):
            meta = run.get("metadata") if isinstance(run.get("metadata"), dict) else {}
            assert isinstance(meta, dict)
            if meta.get(META_INTERRUPT) != interrupt.native_id:
                continue
            if meta.get(META_COMMAND) == key:
                return ActionOutcome(
                    detail=(
                        f"already delivered: run {run.get('run_id')} resumed interrupt "
                        f"{interrupt.native_id} with this command ({run.get('status')})"
                    )
                )
            raise Conflict(
                f"interrupt {interrupt.native_id} was already decided "
                f"({meta.get(META_DECISION)} by {meta.get(META_BY) or '?'})",
                target=interrupt.id,
            )
        if intent_of(thread).get("action") == "cancel":
            raise Conflict(f"thread {tid} was cancelled: interrupt {interrupt.native_id} is gone")
        if await self._was_raised(tid, interrupt.native_id):
            raise Conflict(
                f"interrupt {interrupt.native_id} is no longer pending (thread "
                f"{thread.get('status')}): it was answered outside irq or withdrawn",
                target=interrupt.id,
            )
        now = ", ".join(sorted(pending)) or "none"
        raise NotFound(
            f"stale interrupt id {interrupt.native_id}: thread {tid} never raised it "
            f"(pending now: {now}); refresh the inbox",
            target=interrupt.id,
        )

    async def _was_raised(self, tid: str, interrupt_id: str) -> bool:
        for snap in await self._http.history(tid, limit=200):
            for task in snap.get("tasks") or []:
                for raised in task.get("interrupts") or [] if isinstance(task, dict) else []:
                    if isinstance(raised, dict) and raised.get("id") == interrupt_id:
                        return True
        return False

    def _thread_of(self, interrupt: Interrupt) -> str:
        prefix = self.run_id("")
        if interrupt.run_id.startswith(prefix):
            return interrupt.run_id[len(prefix) :]
        raise NotFound(f"interrupt {interrupt.id} does not belong to langgraph:{self.context}")


def _after_resume(thread: dict[str, Any], ended: bool) -> str:
    """What the graph did with the decision, as far as the follow saw it."""
    status = thread.get("status")
    if status == "error":
        error = thread.get("error")
        return (
            f"; the node then failed on it ({str(error)[:200]}): a poisoned resume, see the "
            "run's warnings for the recovery"
        )
    if status == "interrupted" and pending_interrupts(thread):
        return "; the graph stopped again at a new interrupt"
    if status == "idle":
        return "; the run completed"
    return "" if ended else "; the graph is still running"


def from_url(parsed: BackendURL, ledger: PauseLedger) -> Backend:
    """``langgraph+http://HOST:PORT`` / ``langgraph+https://HOST[/PATH]`` (an Agent Server),
    or ``langgraph+sqlite:////abs/file.sqlite?graph=MODULE:ATTR`` /
    ``langgraph+postgresql://USER@HOST:PORT/DB?graph=MODULE:ATTR&password_env=VAR``
    (checkpointer mode, ``checkpointer.py``).

    Parameters: ``api_key_env=VAR`` / ``api_key_file=PATH`` (sent as ``x-api-key``),
    ``header_env=`` / ``header_file=`` (other headers), ``timeout`` (seconds per call, 5),
    ``page_size`` (500), ``finished_limit`` (idle and failed threads listed, 200 each),
    ``checkpointer`` (what keeps the threads: ``memory`` or ``postgres``; default: detected),
    ``verify_s`` (how long a decision waits to see its interrupt consumed, 10), ``follow_s``
    (how long a decision follows its run on the SSE join stream to report what the graph did
    with it, 3; 0: not at all)."""
    parts = urlsplit(parsed.target)
    if parts.scheme in ("sqlite", "postgresql", "postgres"):
        return _checkpointer_from_url(parsed, ledger)
    parts, host = http_target(parsed, BACKEND)
    params = dict(parsed.params)
    api_key = take_secret(params, "api_key")
    headers = take_headers(params)

    def number(name: str, default: float, minimum: float) -> float:
        return take_number(params, name, default, minimum, backend=BACKEND)

    timeout = number("timeout", 5.0, 0.1)
    page_size = int(min(number("page_size", 500, 1), 1000))  # the server's maximum
    finished_limit = int(number("finished_limit", 200, 0))
    verify_s = number("verify_s", 10.0, 0.0)
    follow_s = number("follow_s", 3.0, 0.0)
    checkpointer = params.pop("checkpointer", None) or None
    reject_unknown(params, backend=BACKEND)
    netloc = host + (f":{parts.port}" if parts.port else "")
    base = f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"
    http = AgentServerHttp(base, api_key=api_key, headers=headers, timeout_s=timeout)
    return LangGraphBackend(
        http,
        ledger,
        context=parsed.context,
        url=base,
        poll_interval_s=parsed.poll_s or DEFAULT_POLL_S,
        page_size=page_size,
        finished_limit=finished_limit,
        checkpointer=checkpointer,
        verify_s=verify_s,
        follow_s=follow_s,
    )


def _checkpointer_from_url(parsed: BackendURL, ledger: PauseLedger) -> Backend:
    from backend_adapters.langgraph.checkpointer import (
        CheckpointerBackend,
        Checkpoints,
        SqliteCheckpoints,
        postgres_checkpoints,
        sqlite_path,
    )

    params = dict(parsed.params)
    graph = params.pop("graph", "")
    store: Checkpoints
    if urlsplit(parsed.target).scheme == "sqlite":
        store = SqliteCheckpoints(sqlite_path(parsed.target))
    else:
        store = postgres_checkpoints(parsed.target, params)
    if not graph:
        raise BackendURLError(
            "langgraph checkpointer mode needs graph=MODULE:ATTR (or FILE.py:ATTR): the graph "
            "that reads and resumes the threads"
        )
    raw_follow = params.pop("follow_s", "3")
    reject_unknown(params, backend=BACKEND)
    try:
        follow_s = float(raw_follow)
    except ValueError as exc:
        raise BackendURLError(f"langgraph URL: follow_s must be a number: {raw_follow!r}") from exc
    return CheckpointerBackend(
        store,
        graph,
        ledger,
        context=parsed.context,
        poll_interval_s=parsed.poll_s or DEFAULT_POLL_S,
        follow_s=follow_s,
    )


#: the type checker holds ``from_url`` (and so LangGraphBackend) to the adapter contract
FACTORY: BackendFactory = from_url
