"""The LangGraph adapter: observe and control threads of a LangGraph Agent Server over HTTP.

``langgraph+http://127.0.0.1:2024`` (``langgraph dev``) or ``langgraph+https://host`` (a
deployment; ``api_key_env=VAR`` / ``api_key_file=PATH`` sends ``x-api-key``). Measured
behaviour in ``docs/backends/langgraph.md``; conventions in ``conventions.py`` and README.md.

:class:`LangGraphBackend` composes the parts, one module each: ``observer.py`` (polls, runs,
journals; static breakpoints in ``breakpoints.py``), ``actions.py`` (pause / resume /
cancel), ``retry.py`` (fork from a checkpoint), ``decision_delivery.py`` (decide; a
breakpoint's in ``breakpoint_delivery.py``), with the thread reads they share in
``thread_reads.py``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from backend_adapters.base import (
    ActionOutcome,
    Backend,
    BackendFactory,
    BackendURL,
    BackendURLError,
    Capabilities,
    Observation,
    PauseLedger,
    Unreachable,
)
from backend_adapters.langgraph.actions import LangGraphActions
from backend_adapters.langgraph.breakpoint_delivery import BreakpointDelivery
from backend_adapters.langgraph.breakpoints import BreakpointReads
from backend_adapters.langgraph.capabilities import LANGGRAPH_CAPABILITIES
from backend_adapters.langgraph.conventions import BACKEND
from backend_adapters.langgraph.decision_delivery import LangGraphDecisionDelivery
from backend_adapters.langgraph.http_api import AgentServerHttp
from backend_adapters.langgraph.observer import LangGraphObserver
from backend_adapters.langgraph.retry import AgentServerRetry
from backend_adapters.langgraph.thread_reads import ThreadReads
from backend_adapters.url_params import http_target, reject_unknown, take_number
from backend_adapters.url_secrets import take_headers, take_secret
from console.model import Decision, Heartbeat, Interrupt, JournalStep, Run
from console.run_facts import RetryOutcome, RetryPlan

DEFAULT_POLL_S = 1.0


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
        threads = ThreadReads(http, url=self.url, verify_s=verify_s)
        self._observer = LangGraphObserver(
            http,
            threads,
            BreakpointReads(http),
            ledger,
            context=context,
            page_size=page_size,
            finished_limit=finished_limit,
            checkpointer=checkpointer,
        )
        self._retry = AgentServerRetry(http, threads)
        self._actions = LangGraphActions(http, threads, ledger, context=context, verify_s=verify_s)
        self._decisions = LangGraphDecisionDelivery(
            http,
            threads,
            BreakpointDelivery(http, threads, follow_s=follow_s),
            context=context,
            verify_s=verify_s,
            follow_s=follow_s,
        )

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self.context, native_id)

    # -------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if not await self._http.ok():
            raise Unreachable(f"{self.url} answered /ok without ok=true", target=self.url)
        await self._observer.detect_checkpointer()

    async def close(self) -> None:
        await self._http.close()

    def capabilities(self) -> Capabilities:
        return LANGGRAPH_CAPABILITIES

    # ------------------------------------------------------------------------ observation

    async def observe(self) -> Observation:
        """Every interrupted and busy thread (all pages), plus the latest idle and failed
        threads (``finished_limit`` each). Threads never run (no graph) are skipped."""
        return await self._observer.observe()

    async def get_run(self, native_id: str) -> Run:
        return await self._observer.get_run(native_id)

    async def journal(self, native_id: str) -> list[JournalStep]:
        return await self._observer.journal(native_id)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return []  # the Agent Server keeps none; pushed heartbeats live in the gateway

    def focus(self, native_ids: set[str]) -> None:
        return None  # every poll reads every live thread

    # ---------------------------------------------------------------------------- actions

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.pause(native_id, reason=reason, identity=identity)

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Continue a stopped thread from its checkpoint. ``lost`` changes nothing here: the
        Agent Server itself runs the graph, so a busy thread is never restarted by irq."""
        return await self._actions.resume(native_id, reason=reason, identity=identity, lost=lost)

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.cancel(native_id, reason=reason, identity=identity)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        return await self._actions.terminate(native_id, reason=reason, identity=identity)

    # --------------------------------------------------------------------------- decisions

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        return await self._decisions.decide(
            interrupt, decision, idempotency_key=idempotency_key, identity=identity
        )

    async def retry_plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        """A fork from the checkpoint before the failed node (or ``from_step``: a node, or a
        journal step number): ``retry.py``."""
        return await self._retry.plan(native_id, from_step)

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
            native_id, from_step, request_id=request_id, reason=reason, identity=identity
        )


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
