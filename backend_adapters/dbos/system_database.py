"""One DBOS system database, read and written through ``DBOSClient`` off the event loop.

Every DBOSClient call is synchronous; they run on a small thread pool owned here, with a
deadline, so the gateway's event loop never blocks. Every database failure becomes a typed
error: a workflow DBOS does not know is ``NotFound``, anything else from the driver
``Unreachable``. The observer, the actions and the decision delivery share one instance.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict, TypeVar

from dbos import DBOSClient, WorkflowStatus
from dbos import error as dbos_error  # public: DBOS exports its error module as ``dbos.error``

from backend_adapters.base import BackendError, NotFound, Unreachable
from backend_adapters.dbos.location import DatabaseLocation

T = TypeVar("T")


class ListOptions(TypedDict):
    load_input: bool
    load_output: bool


#: workflow lists without inputs and outputs (the adapter never needs them)
LIST: ListOptions = {"load_input": False, "load_output": False}


class SystemDatabase:
    """A DBOSClient on one system database (connected on first use) and its threads."""

    def __init__(self, location: DatabaseLocation, *, context: str, call_timeout_s: float) -> None:
        self.url = location.display
        self._location = location
        self._context = context
        self._call_timeout_s = call_timeout_s
        self._client: DBOSClient | None = None
        self._client_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a pool thread, within the call deadline."""
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=3, thread_name_prefix=f"irq-dbos-{self._context}"
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
        except dbos_error.DBOSNonExistentWorkflowError as exc:
            raise NotFound(str(exc), target=self.url) from exc
        except Exception as exc:  # anything from the driver means unreachable
            raise Unreachable(_explain(exc, self.url), target=self.url) from exc

    def connected(self) -> DBOSClient:
        """The client (pool threads only), connected now if it is not yet."""
        with self._client_lock:
            if self._client is None:
                client = DBOSClient(
                    system_database_url=self._location.url, retry_connection_errors=False
                )
                try:
                    client.list_workflows(limit=1, **LIST)  # is it a DBOS system database?
                except Exception:
                    client.destroy()
                    raise
                self._client = client
            return self._client

    def status(self, native_id: str) -> WorkflowStatus:
        """One workflow's status (pool threads only); NotFound when DBOS has no such id."""
        found = self.connected().list_workflows(workflow_ids=[native_id], **LIST)
        if not found:
            raise NotFound(f"no DBOS workflow {native_id!r} in {self.url}", target=native_id)
        return found[0]

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


def _explain(exc: Exception, url: str) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    if "no such table" in first:
        return f"{url} is not a DBOS system database ({first})"
    if "file is not a database" in first:
        return f"{url} is not a SQLite database ({first})"
    return f"DBOS system database {url} unreachable: {type(exc).__name__}: {first}"[:500]
