"""The agent side of a forced release, for one heartbeat pusher (heartbeat_push.py).

The pusher shows this every frame it queues (:meth:`ReleaseRequests.reported`: the last frame
of each run is kept, and resources an operator forced free are reported ``released`` from
then on) and hands it every ``release`` frame the gateway sends
(:meth:`ReleaseRequests.request`). A request is served on a thread of its own, never the
sender's: the release callback (release_callbacks.py) may take its time. When it returns,
the run's next beat, with the resource released, is queued before the ``release_result``
answer (the pusher sends beats before event frames), so the gateway has the report that
verifies the release when the answer arrives.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from backend_adapters.heartbeat_loop import next_seq
from backend_adapters.release_callbacks import ReleaseCallbacks, ReleaseRequest

log = logging.getLogger("irq.agent.release")

FrameKey = tuple[str, str | None, str]


class ReleaseRequests:
    def __init__(self, callbacks: ReleaseCallbacks, push: Callable[[dict[str, Any]], None],
                 answer: Callable[[dict[str, Any]], None], *, max_runs: int = 10_000) -> None:
        """``push``: queue a heartbeat frame; ``answer``: queue a frame that must arrive."""
        self.callbacks = callbacks
        self._push = push
        self._answer = answer
        self._max_runs = max_runs
        self._last: OrderedDict[FrameKey, dict[str, Any]] = OrderedDict()
        self._released: dict[FrameKey, set[str]] = {}
        self._lock = threading.Lock()

    def reported(self, key: FrameKey, frame: dict[str, Any]) -> dict[str, Any]:
        """``frame`` as it goes out (resources forced free reported released), kept as the
        run's last frame."""
        with self._lock:
            freed = self._released.get(key)
            if freed:
                frame["resources"] = [
                    {**r, "state": "released"} if isinstance(r, Mapping) and r.get("id") in freed
                    else r for r in frame.get("resources") or []]
            self._last[key] = frame
            self._last.move_to_end(key)
            while len(self._last) > self._max_runs:
                gone, _ = self._last.popitem(last=False)
                self._released.pop(gone, None)
        return frame

    def request(self, frame: Mapping[str, Any]) -> None:
        """A ``release`` frame from the gateway: served on its own thread."""
        threading.Thread(target=self._serve, args=(dict(frame),), name="irq-release",
                         daemon=True).start()

    def _serve(self, frame: dict[str, Any]) -> None:
        request = ReleaseRequest(
            backend=str(frame.get("backend") or ""), context=frame.get("context") or None,
            native_id=str(frame.get("native_id") or ""), resource=str(frame.get("resource")),
            kind=str(frame.get("kind") or ""), reason=str(frame.get("reason") or ""),
            request_id=str(frame.get("id") or ""))
        key, last = self._find(request)
        if key is None or last is None:
            self._reply(request, "unknown_run", "this process does not report that run")
            return
        callback = self.callbacks.find(request.resource, request.kind)
        if callback is None:
            self._reply(request, "no_callback", f"no release callback for {request.resource} "
                        f"or kind {request.kind} in this process")
            return
        try:
            callback(request)
        except Exception as exc:
            log.warning("release callback for %s failed", request.resource, exc_info=True)
            self._reply(request, "failed", f"{type(exc).__name__}: {exc}"[:500])
            return
        with self._lock:
            self._released.setdefault(key, set()).add(request.resource)
        seq = last.get("seq")
        self._push({**last, "seq": next_seq(seq if isinstance(seq, int) else 0),
                    "at": datetime.now(UTC).isoformat()})
        self._reply(request, "released", f"{request.resource} released by the agent's callback")

    def _find(self, request: ReleaseRequest) -> tuple[FrameKey | None, dict[str, Any] | None]:
        """The run's key and last frame (a frame may leave its context out)."""
        with self._lock:
            for key in ((request.backend, request.context, request.native_id),
                        (request.backend, None, request.native_id)):
                last = self._last.get(key)
                if last is not None:
                    return key, dict(last)
        return None, None

    def _reply(self, request: ReleaseRequest, outcome: str, detail: str) -> None:
        self._answer({"type": "release_result", "id": request.request_id,
                      "outcome": outcome, "detail": detail})
