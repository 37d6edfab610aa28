"""Process-wide side of irq's DBOS agent helpers: config, metadata client, heartbeat thread.

One :class:`AgentRuntime` per agent process: it owns the ``DBOSClient`` through which irq
writes and reads its workflow attributes (never journaled), the heartbeat pusher, and the
thread that beats for every live :class:`~backend_adapters.dbos.agent.AgentRun`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from dbos import DBOSClient, DBOSConfig, WorkflowStatus

from backend_adapters.heartbeat_push import HeartbeatPusher, shared_pusher

if TYPE_CHECKING:
    from backend_adapters.dbos.agent import AgentRun

log = logging.getLogger("irq.agent.dbos")

ENV_CONTEXT = "IRQ_AGENT_CONTEXT"


def agent_config(
    name: str,
    system_database_url: str,
    *,
    app_version: str,
    executor_id: str | None = None,
    notification_polling_s: float = 0.1,
    **extra: Any,
) -> DBOSConfig:
    """A DBOS config for an irq agent: a **pinned** application version (an unpinned one is a
    hash of the workflow source, so every code edit would orphan PENDING runs, dbos.md §8.1),
    and fast notification polling so decisions wake ``recv`` promptly on SQLite (§5)."""
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": system_database_url,
        "application_version": app_version,
        "notification_listener_polling_interval_sec": notification_polling_s,
        **extra,
    }
    if executor_id:
        config["executor_id"] = executor_id
    return config  # type: ignore[return-value]


# -------------------------------------------------------------------------------- runtime


class AgentRuntime:
    """Process-wide state: a DBOSClient for irq's non-journaled metadata, the heartbeat
    pusher and the thread that beats for every live :class:`AgentRun` in this process."""

    def __init__(
        self,
        system_database_url: str,
        *,
        context: str | None = None,
        pusher: HeartbeatPusher | None = None,
        tick_s: float = 0.25,
    ) -> None:
        self.context = context if context is not None else (os.environ.get(ENV_CONTEXT) or None)
        self.pusher = pusher or shared_pusher()
        self._url = system_database_url
        self._client: DBOSClient | None = None
        self._client_lock = threading.Lock()
        self._runs: set[AgentRun] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._tick_s = tick_s
        self._thread = threading.Thread(target=self._beat, name="irq-agent-beat", daemon=True)
        self._thread.start()

    @property
    def client(self) -> DBOSClient:
        """Created on first use, so configure_agent() may run before DBOS.launch()."""
        with self._client_lock:
            if self._client is None:
                self._client = DBOSClient(
                    system_database_url=self._url, system_database_pool_size=10
                )
            return self._client

    def register(self, run: AgentRun) -> None:
        with self._lock:
            self._runs.add(run)

    def unregister(self, run: AgentRun) -> None:
        with self._lock:
            self._runs.discard(run)

    def _beat(self) -> None:
        while not self._stop.wait(self._tick_s):
            with self._lock:
                runs = list(self._runs)
            now = time.monotonic()
            for run in runs:
                if now >= run.next_beat:
                    run.next_beat = now + run.interval_s
                    self.pusher.push(run.frame())

    def status(self, workflow_id: str) -> WorkflowStatus | None:
        found = self.client.list_workflows(
            workflow_ids=[workflow_id], load_input=False, load_output=False
        )
        return found[0] if found else None

    def write(self, workflow_id: str, attributes: dict[str, Any]) -> None:
        """Merge irq attributes into the workflow (a plain row update, never journaled)."""
        try:
            self.client.update_workflow_attributes(workflow_id, attributes, merge=True)
        except Exception:  # metadata must never break the agent
            log.warning("could not write irq attributes for %s", workflow_id, exc_info=True)

    def close(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        self.pusher.flush(timeout_s)
        client, self._client = self._client, None
        if client is not None:
            try:
                client.destroy()
            except Exception:
                log.debug("DBOSClient.destroy failed", exc_info=True)


_runtime: AgentRuntime | None = None


def configure_agent(
    system_database_url: str,
    *,
    context: str | None = None,
    pusher: HeartbeatPusher | None = None,
) -> AgentRuntime:
    """Set up irq's agent side for this process. Call it once, before ``DBOS.launch()``:
    launch() starts recovered workflows, which enter :class:`AgentRun` at once (if it comes
    later, ``agent_runtime()`` waits briefly for it). The DBOSClient for irq's metadata is
    created on first use, once DBOS has created the schema."""
    global _runtime
    if _runtime is not None:
        _runtime.close(0.0)
    _runtime = AgentRuntime(system_database_url, context=context, pusher=pusher)
    atexit.register(_runtime.close)
    return _runtime


def agent_runtime(wait_s: float = 10.0) -> AgentRuntime:
    """The configured runtime; waits up to ``wait_s`` for configure_agent() (recovered
    workflows start inside DBOS.launch(), before the process can call it)."""
    deadline = time.monotonic() + wait_s
    while _runtime is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if _runtime is None:
        raise RuntimeError("irq agent not configured: call configure_agent(system_database_url)")
    return _runtime
