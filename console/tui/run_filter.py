"""The ``/`` filter: free text plus ``key:value`` terms.

Examples: ``state:late``, ``state:late,lost``, ``backend:dbos``, ``ctx:prod``,
``state:active`` (any non-terminal state), ``has:interrupt``, ``-state:completed``,
``research gpu`` (every word must appear in the id, name, native state or step).
Unknown keys are treated as text so a typo filters to nothing rather than erroring.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from console.model import TERMINAL_STATES, Run, RunState

KEYS = ("state", "backend", "ctx", "context", "has", "id")
STATE_ALIASES: dict[str, frozenset[RunState]] = {
    "active": frozenset(s for s in RunState if s not in TERMINAL_STATES),
    "terminal": frozenset(TERMINAL_STATES),
    "done": frozenset(TERMINAL_STATES),
    "backoff": frozenset({RunState.BACKING_OFF}),
}


@dataclass(frozen=True)
class Term:
    key: str  # "" for free text
    values: tuple[str, ...]
    negate: bool = False
    states: frozenset[RunState] = frozenset()  # for key "state": the states it admits


@dataclass(frozen=True)
class FilterQuery:
    text: str = ""
    terms: tuple[Term, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.terms

    @classmethod
    def parse(cls, text: str) -> FilterQuery:
        terms: list[Term] = []
        for word in text.split():
            negate = word.startswith("-") and len(word) > 1
            body = word[1:] if negate else word
            key, sep, value = body.partition(":")
            key = key.lower()
            if sep and key in KEYS and value:
                values = tuple(v.lower() for v in value.split(",") if v)
                key = "context" if key == "ctx" else key
                admitted = frozenset(_states(values)) if key == "state" else frozenset()
                terms.append(Term(key, values, negate, admitted))
            else:
                terms.append(Term("", (body.lower(),), negate))
        return cls(text=text.strip(), terms=tuple(terms))

    def states(self) -> frozenset[RunState] | None:
        """The states a ``state:`` term admits (None when there is no such term)."""
        admitted: set[RunState] | None = None
        for term in self.terms:
            if term.key != "state" or term.negate:
                continue
            admitted = set(term.states) if admitted is None else admitted & term.states
        return frozenset(admitted) if admitted is not None else None

    def matches(self, run: Run, state: RunState, haystack: str | None = None) -> bool:
        """Does ``run`` (shown in ``state``) pass every term?"""
        for term in self.terms:
            if _term_matches(term, run, state, haystack) == term.negate:
                return False
        return True


def _states(values: Iterable[str]) -> Iterable[RunState]:
    for value in values:
        if value in STATE_ALIASES:
            yield from STATE_ALIASES[value]
            continue
        for state in RunState:
            if state.value == value or state.value.startswith(value):
                yield state


def haystack_of(run: Run) -> str:
    """The lower-cased text free-text terms search in."""
    return " ".join(
        (run.id, run.name, run.native_state, run.in_flight_step or "", *run.warnings)
    ).lower()


def _term_matches(term: Term, run: Run, state: RunState, haystack: str | None) -> bool:
    if term.key == "state":
        return state in term.states
    if term.key == "backend":
        return any(run.backend.lower().startswith(v) for v in term.values)
    if term.key == "context":
        return any(run.context.lower().startswith(v) for v in term.values)
    if term.key == "id":
        return any(v in run.id.lower() for v in term.values)
    if term.key == "has":
        return all(_has(run, v) for v in term.values)
    hay = haystack if haystack is not None else haystack_of(run)
    return all(v in hay for v in term.values)


def _has(run: Run, what: str) -> bool:
    if what in ("interrupt", "interrupts", "intr"):
        return bool(run.interrupts)
    if what in ("warning", "warnings", "warn"):
        return bool(run.warnings)
    if what in ("resource", "resources", "res"):
        return any(r.state != "released" for r in run.resources)
    if what in ("leak", "leaks"):
        return any(r.state == "suspected_leak" for r in run.resources)
    if what == "preempted":
        return run.preempted
    return False
