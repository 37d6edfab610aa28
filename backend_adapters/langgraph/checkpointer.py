"""Checkpointer mode: threads of graphs that a team runs in its own process, observed straight
from their SQLite or PostgreSQL checkpointer and decided by resuming through the graph.

``langgraph+sqlite:////abs/checkpoints.sqlite?graph=my_pkg.agents:graph`` (or
``graph=/abs/path/agents.py:graph``), or
``langgraph+postgresql://USER@HOST:PORT/DB?graph=...&password_env=VAR`` (``password_file=``
too; backend_adapters/url_secrets.py). The graph is imported in the gateway process and
compiled with a ``SqliteSaver`` on the same file, or a ``PostgresSaver`` (the
``langgraph-checkpoint-postgres`` library) on the same database (``StateGraph`` builders and
compiled graphs both work). irq never creates or migrates the checkpointer's tables: the
graph's own process does (``saver.setup()``). Every thread in the file or database is read as
a thread of that graph: one URL per graph.

What it can and cannot know (no server holds the runs):

- ``waiting``: the thread's latest checkpoint has pending interrupts (one inbox item per id);
  ``completed``: nothing is next; ``failed``: a task of the latest checkpoint failed;
  otherwise ``running``: the checkpointer cannot tell a graph that runs from a process that
  died; only heartbeats pushed with irq's agent helper can.
- ``decide`` resumes by interrupt id (``Command(resume={id: value})``) **in the gateway
  process**, in a background thread, with irq's metadata on the config (it lands in the
  checkpoint metadata, which is how a re-driven command is found); the same checks as on the
  Agent Server (shape, allowed decisions, schema, pending right before sending, one resume
  per thread at a time in this gateway).
- ``retry`` forks a failed thread from a checkpoint (``retry.py``) by invoking the graph in
  the gateway process with ``checkpoint_id`` and input None; irq's ``irq_retry_id`` lands in
  the new checkpoints' metadata, so the same command twice runs once.
- pause, resume, cancel, terminate: unsupported (stop or restart the process that runs it).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from backend_adapters.base import (
    ActionCapability,
    ActionOutcome,
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
from backend_adapters.langgraph.conventions import (
    BACKEND,
    META_BY,
    META_COMMAND,
    META_DECISION,
    META_INTERRUPT,
    META_RETRY,
)
from backend_adapters.langgraph.interrupt_shapes import (
    ShapeError,
    interrupt_from_value,
    refuse_langgraph_decision,
    resume_value,
)
from backend_adapters.langgraph.retry import (
    checkpoint_of,
    current_branch,
    failure_of,
    plan_retry,
    refuse_while_active,
)
from backend_adapters.langgraph.state_mapping import (
    interrupts_of,
    journal_from_history,
    run_from_thread,
)
from backend_adapters.url_secrets import take_secret
from console.model import (
    Action,
    Decision,
    DecisionKind,
    Heartbeat,
    Interrupt,
    JournalStep,
    Run,
    decision_text,
)
from console.run_facts import RetryOutcome, RetryPlan

T = TypeVar("T")
log = logging.getLogger("irq.langgraph.checkpointer")

_NO_SERVER = "no server holds these runs: stop or restart the process that runs the graph"

CHECKPOINTER_CAPABILITIES = Capabilities(
    backend=BACKEND,
    actions={
        action: ActionCapability(supported=False, native=False, meaning=_NO_SERVER)
        for action in (Action.PAUSE, Action.RESUME, Action.CANCEL, Action.TERMINATE)
    }
    | {
        Action.RETRY: ActionCapability(
            supported=True,
            native=True,
            meaning=(
                "fork a failed thread from a checkpoint: the graph runs again in the gateway "
                "process from the checkpoint before the failed node (or a chosen node / "
                "journal step); every re-run node's side effects happen again"
            ),
            operations=("graph.invoke(None, {thread_id, checkpoint_id})",),
        )
    },
    decisions=tuple(DecisionKind),
    native_heartbeats=False,
    notes=(
        "checkpointer mode: threads read from the SQLite or PostgreSQL checkpointer; decisions "
        "resume the "
        "graph (imported from the URL's graph=) in the gateway process",
        "a thread that is neither waiting nor finished shows running: the checkpointer cannot "
        "tell a running graph from a dead process (push heartbeats with irq's agent helper)",
    ),
)


def load_graph(spec: str) -> tuple[Any, str]:
    """``module.path:attr`` or ``/path/file.py:attr`` -> (the object, its name)."""
    where, colon, attr = spec.rpartition(":")
    if not colon or not where or not attr:
        raise BackendURLError(f"graph= takes MODULE:ATTR or FILE.py:ATTR, got {spec!r}")
    try:
        if where.endswith(".py"):
            path = Path(where).expanduser().resolve()
            name = f"irq_graph_{path.stem}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise BackendURLError(f"graph=: cannot load {path}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        graph = getattr(module, attr)
    except BackendURLError:
        raise
    except Exception as exc:
        raise BackendURLError(f"graph={spec}: {type(exc).__name__}: {exc}") from exc
    return graph, attr


class SqliteCheckpoints:
    """A SQLite checkpointer file: the saver the graph is compiled with, and its threads."""

    kind = "sqlite"
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite://{path}"
        self._conn: sqlite3.Connection | None = None

    def saver(self) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver

        if not self.path.is_file():
            raise Unreachable(f"no checkpointer file at {self.path}", target=self.url)
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False)
        return SqliteSaver(self._conn)

    def thread_ids(self) -> list[str]:
        assert self._conn is not None
        rows = self._conn.execute(
            "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = ''"
        ).fetchall()
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class PostgresCheckpoints:
    """A PostgreSQL database that a ``PostgresSaver`` writes: a small psycopg pool (it
    reconnects after the server restarts), the saver on it, and the threads in its tables."""

    kind = "postgres"
    errors: tuple[type[Exception], ...] = ()

    def __init__(self, conninfo: str, display: str, *, timeout_s: float = 5.0) -> None:
        import psycopg

        self.errors = (psycopg.Error,)
        self.url = display  # never the password
        self._conninfo = conninfo
        self._timeout_s = timeout_s
        self._pool: Any = None

    def saver(self) -> Any:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import DictRow, dict_row
        from psycopg_pool import ConnectionPool

        # one plain connection first: the pool would retry a refused login until its timeout
        # and report only "pool initialization incomplete"; this reports the server's reason
        with Connection.connect(self._conninfo, connect_timeout=max(1, round(self._timeout_s))):
            pass
        pool = ConnectionPool(
            self._conninfo,
            connection_class=Connection[DictRow],  # rows as dicts: what PostgresSaver reads
            min_size=1,
            max_size=4,
            open=False,
            timeout=self._timeout_s,
            check=ConnectionPool.check_connection,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            name="irq-langgraph-checkpoints",
        )
        try:
            pool.open(wait=True, timeout=self._timeout_s)
        except Exception:
            pool.close()
            raise
        self._pool = pool
        return PostgresSaver(pool)

    def thread_ids(self) -> list[str]:
        assert self._pool is not None
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = ''"
            ).fetchall()
        return [str(r["thread_id"]) for r in rows]

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


Checkpoints = SqliteCheckpoints | PostgresCheckpoints


class CheckpointerBackend:
    """Threads in one SQLite checkpointer file or PostgreSQL database, decided through one
    graph."""

    name = BACKEND

    def __init__(
        self,
        store: Checkpoints,
        graph_spec: str,
        ledger: PauseLedger,
        *,
        context: str = "local",
        poll_interval_s: float = 1.0,
        follow_s: float = 3.0,
    ) -> None:
        self.context = context
        self.url = store.url
        self.poll_interval_s = poll_interval_s
        self._store = store
        self._graph_spec = graph_spec
        self._ledger = ledger
        self._follow_s = follow_s
        self._graph: Any = None
        self._graph_name = graph_spec.rpartition(":")[2]
        self._lock = threading.Lock()  # one reader at a time, one resume per thread
        self._resuming: set[str] = set()

    # -------------------------------------------------------------------------- plumbing

    def run_id(self, native_id: str) -> str:
        return Run.make_id(BACKEND, self.context, native_id)

    def _open(self) -> Any:
        if self._graph is None:
            graph, name = load_graph(self._graph_spec)
            builder = getattr(graph, "builder", graph)
            if not hasattr(builder, "compile"):
                raise BackendURLError(f"graph={self._graph_spec} is not a LangGraph graph")
            self._graph = builder.compile(checkpointer=self._store.saver())
            self._graph_name = getattr(graph, "name", None) or name
            if self._graph_name == "LangGraph":
                self._graph_name = name
        return self._graph

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        def guarded() -> T:
            with self._lock:
                try:
                    return fn(*args)
                except (NotFound, Conflict, InvalidInput, Unsupported, Unreachable):
                    raise
                except BackendURLError as exc:
                    raise Unreachable(str(exc), target=self.url) from exc
                except self._store.errors as exc:
                    raise Unreachable(f"{self.url}: {exc}", target=self.url) from exc

        return await asyncio.to_thread(guarded)

    # ------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await self._call(self._open)

    async def close(self) -> None:
        self._graph = None
        await asyncio.to_thread(self._store.close)

    def capabilities(self) -> Capabilities:
        return CHECKPOINTER_CAPABILITIES

    # ---------------------------------------------------------------------- observation

    def _thread_ids(self) -> list[str]:
        self._open()
        return self._store.thread_ids()

    def _as_thread(self, tid: str) -> dict[str, Any]:
        """A thread as the Agent Server would report it, from the graph's state."""
        snap = self._open().get_state({"configurable": {"thread_id": tid}})
        pending: dict[str, list[dict[str, Any]]] = {}
        failed = False
        for task in snap.tasks:
            failed = failed or bool(task.error)
            items = [{"id": i.id, "value": i.value} for i in task.interrupts]
            if items:
                pending[task.id] = items
        if pending:
            status = "interrupted"
        elif failed:
            status = "error"
        elif not snap.next:
            status = "idle"
        else:
            status = "busy"
        return {
            "thread_id": tid,
            "status": status,
            "interrupts": pending,
            "metadata": {"graph_id": self._graph_name},
            "created_at": snap.created_at,
            "updated_at": snap.created_at,
            "state_updated_at": snap.created_at,  # the newest checkpoint: Run.last_step_at
            "next": list(snap.next),
            "latest": _snapshot_dict(snap),
        }

    def _observe_sync(self) -> list[dict[str, Any]]:
        return [self._as_thread(tid) for tid in self._thread_ids()]

    def _to_run(self, thread: dict[str, Any]) -> tuple[Run, list[Interrupt]]:
        run_id = self.run_id(thread["thread_id"])
        interrupts = interrupts_of(thread, run_id=run_id)
        failure = (
            failure_of([checkpoint_of(thread["latest"])]) if thread["status"] == "error" else None
        )
        run = run_from_thread(
            thread, context=self.context, checkpointer=self._store.kind, interrupts=interrupts,
            failure=failure,
        )
        run.action_notes = {a: n for a, n in run.action_notes.items() if a is Action.RETRY}
        if thread["status"] == "busy":
            run.native_state = f"next: {', '.join(thread['next'])}"
            run.warnings.append(
                "checkpointer mode: running or its process died (only pushed heartbeats tell)"
            )
        return run, interrupts

    async def observe(self) -> Observation:
        threads = await self._call(self._observe_sync)
        observation = Observation()
        for thread in threads:
            run, interrupts = self._to_run(thread)
            observation.runs.append(run)
            observation.interrupts.extend(interrupts)
        return observation

    def _known(self, tid: str) -> dict[str, Any]:
        if tid not in self._thread_ids():
            raise NotFound(f"no thread {tid!r} in {self.url}", target=tid)
        return self._as_thread(tid)

    async def get_run(self, native_id: str) -> Run:
        return self._to_run(await self._call(self._known, native_id))[0]

    def _history(self, tid: str) -> list[dict[str, Any]]:
        config = {"configurable": {"thread_id": tid}}
        return [_snapshot_dict(s) for s in self._open().get_state_history(config)]

    def _journal_sync(self, tid: str) -> list[JournalStep]:
        thread = self._known(tid)
        history = self._history(tid)
        decided = {
            str(h["metadata"][META_INTERRUPT]): (
                f"{h['metadata'].get(META_DECISION)} by {h['metadata'].get(META_BY) or '?'}"
            )
            for h in history
            if h["metadata"].get(META_INTERRUPT)
        }
        return journal_from_history(history, thread=thread, decided=decided)

    async def journal(self, native_id: str) -> list[JournalStep]:
        return await self._call(self._journal_sync, native_id)

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        return []

    def focus(self, native_ids: set[str]) -> None:
        return None

    # -------------------------------------------------------------------------- actions

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(_NO_SERVER, target=native_id)

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        raise Unsupported(_NO_SERVER, target=native_id)

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(_NO_SERVER, target=native_id)

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome:
        raise Unsupported(_NO_SERVER, target=native_id)

    # ------------------------------------------------------------------------ decisions

    def _prepare(
        self, tid: str, interrupt: Interrupt, decision: Decision, key: str, identity: str
    ) -> tuple[Any, dict[str, Any]] | ActionOutcome:
        """(resume value, config) to send, or the outcome of a command already delivered."""
        if tid in self._resuming:
            raise Conflict(f"thread {tid} is already being resumed by this gateway")
        thread = self._known(tid)
        pending = {item["id"]: item for items in thread["interrupts"].values() for item in items}
        item = pending.get(interrupt.native_id)
        if item is None:
            history = self._history(tid)
            for h in history:
                meta = h["metadata"]
                if meta.get(META_INTERRUPT) != interrupt.native_id:
                    continue
                if meta.get(META_COMMAND) == key:
                    return ActionOutcome(detail="already delivered (same command id)")
                raise Conflict(
                    f"interrupt {interrupt.native_id} was already decided "
                    f"({meta.get(META_DECISION)} by {meta.get(META_BY) or '?'})"
                )
            raised = any(
                i.get("id") == interrupt.native_id
                for h in history
                for task in h["tasks"]
                for i in task["interrupts"]
            )
            if raised:
                raise Conflict(
                    f"interrupt {interrupt.native_id} is no longer pending: it was answered "
                    "outside irq",
                    target=interrupt.id,
                )
            now = ", ".join(sorted(pending)) or "none"
            raise NotFound(
                f"stale interrupt id {interrupt.native_id}: not pending on thread {tid} "
                f"(pending now: {now})",
                target=interrupt.id,
            )
        fresh = interrupt_from_value(
            item["value"], run_id=interrupt.run_id, native_id=interrupt.native_id,
            created_at=interrupt.created_at,
        )
        refuse_langgraph_decision(fresh, decision, target=fresh.id)
        try:
            value = resume_value(item["value"], decision)
        except ShapeError as exc:
            raise InvalidInput(f"decision refused: {exc}", target=interrupt.id) from exc
        config = {
            "configurable": {"thread_id": tid},
            "metadata": {
                META_COMMAND: key,
                META_INTERRUPT: interrupt.native_id,
                META_DECISION: decision.kind.value,
                META_BY: identity,
            },
        }
        self._resuming.add(tid)
        return value, config

    def _resume_in_background(self, tid: str, native_id: str, value: Any,
                              config: dict[str, Any]) -> threading.Thread:
        from langgraph.types import Command

        return self._run_in_background(tid, Command(resume={native_id: value}), config)

    def _run_in_background(self, tid: str, payload: Any,
                           config: dict[str, Any]) -> threading.Thread:
        graph = self._open()

        def run() -> None:
            try:
                graph.invoke(payload, config)
            except Exception:
                log.exception("running thread %s failed", tid)
            finally:
                self._resuming.discard(tid)

        thread = threading.Thread(target=run, name=f"irq-langgraph-resume-{tid}", daemon=True)
        thread.start()
        return thread

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        refuse_langgraph_decision(interrupt, decision, target=interrupt.id)
        prefix = self.run_id("")
        if not interrupt.run_id.startswith(prefix):
            raise NotFound(f"interrupt {interrupt.id} does not belong to langgraph:{self.context}")
        tid = interrupt.run_id[len(prefix) :]
        prepared = await self._call(
            self._prepare, tid, interrupt, decision, idempotency_key, identity
        )
        if isinstance(prepared, ActionOutcome):
            return prepared
        value, config = prepared
        worker = self._resume_in_background(tid, interrupt.native_id, value, config)
        await asyncio.to_thread(worker.join, self._follow_s)
        detail = (
            f"resumed interrupt {interrupt.native_id} with {decision_text(decision)} through "
            f"{self._graph_name} in the gateway process"
        )
        detail += "; still running" if worker.is_alive() else "; the graph stopped or finished"
        operation = f"{self._graph_name}.invoke(Command(resume={{interrupt id: value}}))"
        return ActionOutcome(detail=detail, operations=[operation])

    def _retry_sync(
        self, tid: str, from_step: str | None, key: str | None, identity: str
    ) -> tuple[RetryPlan, dict[str, Any]] | RetryOutcome:
        """The plan and the config a fork runs with; or, for a command already run, what it
        did (its key is in the metadata of the checkpoints it wrote)."""
        if tid in self._resuming:
            raise Conflict(f"thread {tid} is being resumed by this gateway: wait for it")
        thread = self._known(tid)
        history = self._history(tid)
        if key and any(h["metadata"].get(META_RETRY) == key for h in history):
            return RetryOutcome(detail="already retried with this command; nothing run")
        refuse_while_active(tid, thread)
        plan, chosen = plan_retry(
            current_branch(history),
            from_step,
            operations=[f"{self._graph_name}.invoke(None, checkpoint_id) in the gateway process"],
        )
        config = {
            "configurable": {"thread_id": tid, "checkpoint_id": chosen.id},
            "metadata": {META_RETRY: key, META_BY: identity},
        }
        return plan, config

    async def retry_plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        prepared = await self._call(self._retry_sync, native_id, from_step, None, "")
        assert not isinstance(prepared, RetryOutcome)
        return prepared[0]

    async def retry(
        self,
        native_id: str,
        *,
        from_step: str | None,
        request_id: str,
        reason: str,
        identity: str,
    ) -> RetryOutcome:
        prepared = await self._call(
            self._retry_sync, native_id, from_step, request_id, identity
        )
        if isinstance(prepared, RetryOutcome):
            return prepared
        plan, config = prepared
        self._resuming.add(native_id)
        worker = self._run_in_background(native_id, None, config)
        await asyncio.to_thread(worker.join, self._follow_s)
        state = "still running" if worker.is_alive() else "the graph stopped or finished"
        return RetryOutcome(
            detail=(
                f"re-running {', '.join(plan.will_rerun)} from checkpoint "
                f"{config['configurable']['checkpoint_id']} in the gateway process; {state}"
            ),
            operations=plan.operations,
        )

def _snapshot_dict(snap: Any) -> dict[str, Any]:
    """A ``StateSnapshot`` shaped like one entry of the Agent Server's ``/history``."""
    parent = (snap.parent_config or {}).get("configurable", {})
    return {
        "checkpoint": snap.config.get("configurable", {}).get("checkpoint_id"),
        "parent_checkpoint": parent.get("checkpoint_id"),
        "metadata": dict(snap.metadata or {}),
        "created_at": snap.created_at,
        "next": list(snap.next),
        "tasks": [
            {
                "name": t.name,
                # a checkpointer keeps the error as its repr string; a live one is the exception
                "error": (t.error if isinstance(t.error, str) else repr(t.error))
                if t.error
                else None,
                "interrupts": [{"id": i.id} for i in t.interrupts],
                "result": t.result,
            }
            for t in snap.tasks
        ],
    }


def sqlite_path(target: str) -> Path:
    """``sqlite:////abs/file`` or ``sqlite:///abs/file`` (an existing absolute file wins over
    a relative one, as for DBOS URLs) -> the file's path."""
    rest = target[len("sqlite://") :]
    if not rest.startswith("/") or rest == "/":
        raise BackendURLError(f"langgraph+sqlite URL names no file: {target!r}")
    if rest.startswith("//"):
        return Path(rest[1:])
    absolute = Path(rest)
    relative = Path(rest[1:])
    return absolute if absolute.exists() or not relative.exists() else relative.resolve()


def postgres_checkpoints(target: str, params: dict[str, str]) -> PostgresCheckpoints:
    """``postgresql://USER@HOST:PORT/DB`` plus ``password_env=``/``password_file=`` (taken out
    of ``params``) -> the database. A password written into the URL works too, but shows in
    ``ps`` and config.toml; it is never displayed."""
    parts = urlsplit(target)
    password = take_secret(params, "password")
    user = parts.username or ""
    if not parts.hostname or not parts.path.strip("/"):
        raise BackendURLError(
            f"langgraph+postgresql URL names no host or database: {target!r} "
            "(langgraph+postgresql://USER@HOST:PORT/DB?graph=MODULE:ATTR)"
        )
    if password is not None and parts.password is not None:
        raise BackendURLError(
            "the URL has a password and names one with password_env=/password_file="
        )
    if password is not None and not user:
        raise BackendURLError(
            "password_env=/password_file= need a user in the URL: "
            "langgraph+postgresql://USER@HOST/DB?password_env=VAR"
        )
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    secret = password if password is not None else parts.password
    credentials = quote(unquote(user), safe="")
    if secret is not None:
        credentials += ":" + quote(secret if password is not None else unquote(secret), safe="")
    conninfo = urlunsplit(
        ("postgresql", f"{credentials}@{netloc}" if credentials else netloc, parts.path, "", "")
    )
    return PostgresCheckpoints(conninfo, f"postgresql://{netloc}{parts.path}")
