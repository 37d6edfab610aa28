"""How an agent frees a resource when an operator forces it (``irq release RUN RESOURCE
--force``): a release callback registered per resource id or kind.

::

    from backend_adapters.release_callbacks import on_release

    @on_release("gpu")                      # every gpu resource this process reports
    def free_gpu(request: ReleaseRequest) -> None:
        gpu_pool.free(request.resource)     # must be idempotent: it may be asked twice

``on_release("gpu-0/slice-2", fn)`` registers for one resource id (an id wins over its kind).
The gateway sends a ``release`` frame on the agent channel to the process that reports the
run (``backend_adapters.heartbeat_push``); the pusher calls the callback on a thread of its
own, then reports the run once more with the resource ``released`` (and keeps reporting it
released: the operator freed it) and answers the gateway. A callback that raises leaves the
resource as it was and the gateway says why. Standard library only (runs inside agents).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload


@dataclass(frozen=True)
class ReleaseRequest:
    """One forced release, as the gateway asked for it."""

    backend: str
    context: str | None
    native_id: str  # the run (workflow id, thread id, invocation id) on its backend
    resource: str  # the resource id
    kind: str
    reason: str = ""  # the operator's --reason
    request_id: str = ""


ReleaseCallback = Callable[[ReleaseRequest], Any]


class ReleaseCallbacks:
    """Resource id or kind -> the callback that frees it (thread-safe)."""

    def __init__(self) -> None:
        self._callbacks: dict[str, ReleaseCallback] = {}
        self._lock = threading.Lock()

    def register(self, key: str, callback: ReleaseCallback) -> None:
        with self._lock:
            self._callbacks[key] = callback

    def unregister(self, key: str) -> None:
        with self._lock:
            self._callbacks.pop(key, None)

    def find(self, resource_id: str, kind: str) -> ReleaseCallback | None:
        """The callback for this resource id, else for its kind."""
        with self._lock:
            return self._callbacks.get(resource_id) or self._callbacks.get(kind)


_shared = ReleaseCallbacks()


def shared_release_callbacks() -> ReleaseCallbacks:
    """The process-wide registry (the one the shared pusher asks)."""
    return _shared


@overload
def on_release(key: str, callback: ReleaseCallback, *,
               registry: ReleaseCallbacks | None = None) -> ReleaseCallback: ...
@overload
def on_release(key: str, callback: None = None, *, registry: ReleaseCallbacks | None = None
               ) -> Callable[[ReleaseCallback], ReleaseCallback]: ...
def on_release(key: str, callback: ReleaseCallback | None = None, *,
               registry: ReleaseCallbacks | None = None
               ) -> ReleaseCallback | Callable[[ReleaseCallback], ReleaseCallback]:
    """Register ``callback`` to free resources of kind (or id) ``key``; as a decorator when
    ``callback`` is left out."""
    target = registry if registry is not None else _shared

    def register(fn: ReleaseCallback) -> ReleaseCallback:
        target.register(key, fn)
        return fn

    return register(callback) if callback is not None else register
