"""Heartbeats for runs no adapter knows (yet): a bounded, least-recently-used store.

An agent often beats before its backend's next poll shows the run, so such beats are kept
and adopted when the run appears. They are also exactly what a flood of made-up run ids
produces, so the store is bounded by count and by bytes (the size of the frames as
received) and evicts the least recently reported run first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Held(Generic[T]):
    value: T
    size: int


class UnknownBeats(Generic[T]):
    def __init__(self, *, max_runs: int, max_bytes: int) -> None:
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self.bytes = 0
        self.evicted = 0
        self._held: OrderedDict[str, Held[T]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._held

    def get(self, run_id: str) -> T | None:
        held = self._held.get(run_id)
        return held.value if held is not None else None

    def put(self, run_id: str, value: T, size: int) -> None:
        old = self._held.pop(run_id, None)
        if old is not None:
            self.bytes -= old.size
        self._held[run_id] = Held(value, size)
        self.bytes += size
        while self._held and (len(self._held) > self.max_runs or self.bytes > self.max_bytes):
            _, gone = self._held.popitem(last=False)
            self.bytes -= gone.size
            self.evicted += 1

    def pop(self, run_id: str) -> T | None:
        held = self._held.pop(run_id, None)
        if held is None:
            return None
        self.bytes -= held.size
        return held.value
