"""The filter grammar shared by the TUI's ``/`` and the CLI's ``--filter``: free text plus
``key:value`` terms (pure: no UI, no transport).

Examples: ``state:late``, ``state:late,lost``, ``backend:dbos``, ``ctx:prod``,
``state:active`` (any non-terminal state), ``state:failed`` / ``state:given_up`` (runs that
failed, or that their engine stopped retrying), ``has:interrupt``, ``has:gpu`` (holds a
resource of that kind or id), ``-state:completed``, ``name:deploy*``, ``resource:gpu*``,
``tool:deploy`` (inbox items: the interrupt's action), ``age>10m`` / ``age<30s`` (runs:
heartbeat age, or time since the last update when there is no heartbeat; inbox items: time
since the interrupt was raised), ``created>2h`` / ``created<10m`` (time since the run
started; inbox items: their run's), ``version:2.3`` (the application version, build or
deployment the run was started on: ``Run.app_version``), ``error:timeout`` (in the error
type or message of a failed or given-up run), ``research gpu`` (every word must appear in
the id, name, native state or step). Values are a comma-separated list (any may match);
``name:``, ``resource:`` and ``tool:`` values are globs (``*``, ``?``) or, without glob
characters, substrings; ``version:`` and ``error:`` values are substrings. Unknown keys are
treated as text so a typo filters to nothing rather than erroring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TypeVar

from console.leak_rule import leaked
from console.model import TERMINAL_STATES, Interrupt, Run, RunState, age_seconds, utcnow
from console.run_record import RunFacts, RunRecord

KEYS = ("state", "backend", "ctx", "context", "has", "id", "name", "resource", "tool",
        "version", "error")
STATE_ALIASES: dict[str, frozenset[RunState]] = {
    "active": frozenset(s for s in RunState if s not in TERMINAL_STATES),
    "terminal": frozenset(TERMINAL_STATES),
    "done": frozenset(TERMINAL_STATES),
    "backoff": frozenset({RunState.BACKING_OFF}),
}
_AGE = re.compile(r"^(age|created)([<>])(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class Term:
    key: str  # "" for free text; "age>" / "age<" / "created>" / "created<" for age bounds
    values: tuple[str, ...]
    negate: bool = False
    states: frozenset[RunState] = frozenset()  # for key "state": the states it admits
    seconds: float = 0.0  # for the age keys: the bound


def parse_duration(text: str) -> float | None:
    """``90``, ``30s``, ``10m``, ``2h``, ``1d`` -> seconds (None when it is not one)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip().lower())
    if match is None:
        return None
    return float(match.group(1)) * _UNIT_S[match.group(2)]


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
            age = _AGE.match(body.lower())
            if age is not None:
                seconds = float(age.group(3)) * _UNIT_S[age.group(4)]
                terms.append(Term(f"{age.group(1)}{age.group(2)}", (), negate, seconds=seconds))
                continue
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

    def matches(
        self,
        run: RunFacts,
        state: RunState,
        haystack: str | None = None,
        now: datetime | None = None,
    ) -> bool:
        """Does ``run`` (shown in ``state``) pass every term?"""
        for term in self.terms:
            if _term_matches(term, run, state, haystack, now) == term.negate:
                return False
        return True

    def matches_interrupt(
        self, interrupt: Interrupt, run: RunFacts | None, now: datetime | None = None
    ) -> bool:
        """Does the inbox item ``interrupt`` (of ``run``, when known) pass every term?

        ``tool:`` is the interrupt's action, ``age`` the time since it was raised, text
        searches its id, title, description and action and its run's name; ``state``,
        ``has``, ``name`` and ``resource`` are its run's (an unknown run matches none)."""
        for term in self.terms:
            if _interrupt_term_matches(term, interrupt, run, now) == term.negate:
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


def haystack_of(run: RunFacts) -> str:
    """The lower-cased text free-text terms search in."""
    return " ".join(
        (run.id, run.name, run.native_state, run.in_flight_step or "", *run.warnings)
    ).lower()


def interrupt_haystack_of(interrupt: Interrupt, run: RunFacts | None) -> str:
    return " ".join(
        (
            interrupt.id,
            interrupt.title,
            interrupt.description,
            interrupt.action,
            run.name if run is not None else "",
        )
    ).lower()


def glob_or_substring(pattern: str, value: str) -> bool:
    """``pattern`` (lower-case) as a glob when it has ``*?[``, else as a substring."""
    value = value.lower()
    if any(c in pattern for c in "*?["):
        return fnmatchcase(value, pattern)
    return pattern in value


def run_age_s(run: RunFacts, now: datetime | None = None) -> float:
    """Heartbeat age, or the time since the run last changed when it has no heartbeat."""
    now = now or utcnow()
    age = age_seconds(run.heartbeat_at, now) if run.heartbeat_at is not None else None
    if age is None:
        age = age_seconds(run.updated_at, now)
    return age or 0.0


def _age_matches(term: Term, age: float) -> bool:
    return age > term.seconds if term.key.endswith(">") else age < term.seconds


def _created_matches(term: Term, run: RunFacts, now: datetime | None) -> bool:
    """``created>``/``created<``: time since the run started (a run whose start the backend
    does not report matches neither bound)."""
    if run.started_at is None:
        return False
    return _age_matches(term, age_seconds(run.started_at, now or utcnow()) or 0.0)


def _error_matches(run: RunFacts, text: str) -> bool:
    error = run.error
    return error is not None and (text in error.type.lower() or text in error.message.lower())


def _held(run: RunFacts) -> list[tuple[str, str]]:
    return [(r.kind.lower(), r.id.lower()) for r in run.resources if r.state != "released"]


def _resource_matches(run: RunFacts, pattern: str) -> bool:
    return any(
        glob_or_substring(pattern, kind) or glob_or_substring(pattern, rid)
        for kind, rid in ((r.kind, r.id) for r in run.resources)
    )


def _term_matches(
    term: Term, run: RunFacts, state: RunState, haystack: str | None, now: datetime | None = None
) -> bool:
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
    if term.key == "name":
        return any(glob_or_substring(v, run.name) for v in term.values)
    if term.key == "resource":
        return any(_resource_matches(run, v) for v in term.values)
    if term.key == "tool":
        return False  # a run has no tool; only inbox items do
    if term.key in ("age>", "age<"):
        return _age_matches(term, run_age_s(run, now))
    if term.key in ("created>", "created<"):
        return _created_matches(term, run, now)
    if term.key == "version":
        return run.app_version is not None and any(
            v in run.app_version.lower() for v in term.values)
    if term.key == "error":
        return any(_error_matches(run, v) for v in term.values)
    hay = haystack if haystack is not None else haystack_of(run)
    return all(v in hay for v in term.values)


def _interrupt_term_matches(
    term: Term, interrupt: Interrupt, run: RunFacts | None, now: datetime | None
) -> bool:
    if term.key == "tool":
        return any(glob_or_substring(v, interrupt.action) for v in term.values)
    if term.key in ("age>", "age<"):
        return _age_matches(term, age_seconds(interrupt.created_at, now or utcnow()) or 0.0)
    if term.key == "id":
        return any(v in interrupt.id.lower() for v in term.values)
    if term.key == "backend" or term.key == "context":
        backend, _, rest = interrupt.run_id.partition(":")
        value = backend if term.key == "backend" else rest.partition("/")[0]
        return any(value.lower().startswith(v) for v in term.values)
    if term.key == "":
        hay = interrupt_haystack_of(interrupt, run)
        return all(v in hay for v in term.values)
    if run is None:
        return False
    return _term_matches(term, run, run.state, None, now)


def _has(run: RunFacts, what: str) -> bool:
    if what in ("interrupt", "interrupts", "intr"):
        return bool(run.interrupts)
    if what in ("warning", "warnings", "warn"):
        return bool(run.warnings)
    if what in ("resource", "resources", "res"):
        return any(r.state != "released" for r in run.resources)
    if what in ("leak", "leaks"):
        return bool(leaked(run.resources, run.state.value))
    if what == "preempted":
        return run.preempted
    # has:gpu -- holds (not released) a resource of that kind or id (globs allowed)
    return any(
        glob_or_substring(what, kind) or glob_or_substring(what, rid) for kind, rid in _held(run)
    )


#: a run as a client reads it or as the gateway's index keeps it (listed as given)
R = TypeVar("R", Run, RunRecord)


def listed_runs(
    runs: Iterable[R], states: Iterable[str] = (), backend: str | None = None,
    expr: str | None = None, now: datetime | None = None,
) -> list[R]:
    """The runs ``irq runs`` lists, by id: in one of ``states`` (any when empty), of
    ``backend`` (``dbos`` or ``dbos:local``), matching the filter ``expr``. The gateway's
    ``runs`` query and the CLI's own view (``--watch``) both list through this."""
    wanted = set(states)
    chosen = sorted(runs, key=lambda r: r.id)
    if wanted:
        chosen = [r for r in chosen if r.state.value in wanted]
    if backend:
        chosen = [r for r in chosen if backend in (r.backend, f"{r.backend}:{r.context}")]
    if expr:
        query, at = FilterQuery.parse(expr), now or utcnow()
        chosen = [r for r in chosen if query.matches(r, r.state, now=at)]
    return chosen
