"""No flapping: a condition raises an alert only after it held for the grace period, and an
open alert clears only after its condition was absent for as long (pure; the evaluator's).

A condition seen, then gone before the grace period ran out, raises nothing; an alert whose
condition blinks off for less than the grace period stays the same alert.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from console.alert_model import Condition


@dataclass(frozen=True)
class GraceStep:
    raise_now: list[tuple[Condition, datetime]]  # (condition, since)
    clear_now: list[str]  # keys of open alerts whose condition ended


class GraceWindow:
    def __init__(self, grace_s: float) -> None:
        self.grace = timedelta(seconds=grace_s)
        self.first_seen: dict[str, datetime] = {}  # held, not raised yet
        self.first_missing: dict[str, datetime] = {}  # raised, its condition gone

    def step(self, seen: Mapping[str, Condition], open_keys: Collection[str],
             now: datetime) -> GraceStep:
        raise_now: list[tuple[Condition, datetime]] = []
        for key, cond in seen.items():
            self.first_missing.pop(key, None)
            if key in open_keys:
                self.first_seen.pop(key, None)
                continue
            first = self.first_seen.setdefault(key, now)
            # a source that knows when the condition began (a deadline, the last answer)
            # vouches for the time before this gateway saw it
            since = min(first, cond.since) if cond.since is not None else first
            if now - since >= self.grace:
                raise_now.append((cond, since))
        for key in [k for k in self.first_seen if k not in seen]:
            del self.first_seen[key]  # ended before its grace period: nothing raised
        clear_now: list[str] = []
        for key in open_keys:
            if key in seen:
                continue
            first = self.first_missing.setdefault(key, now)
            if now - first >= self.grace:
                clear_now.append(key)
        for key in [k for k in self.first_missing if k not in open_keys]:
            del self.first_missing[key]  # cleared (here or by a peer)
        return GraceStep(raise_now, clear_now)

    def raised(self, key: str) -> None:
        self.first_seen.pop(key, None)

    def cleared(self, key: str) -> None:
        self.first_missing.pop(key, None)
