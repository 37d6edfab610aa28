"""Which run or interrupt a short id names -- the one rule every mutation uses (CLI and TUI).

An id names a target by, in this order: the exact id, an exact alias (the backend's native
id; for interrupts also ``RUN_NATIVE#INTERRUPT_NATIVE``), or a unique prefix of an id or an
alias. Never a suffix or a substring: ``03-0001/1`` must not pick whichever interrupt
happens to end that way (a "drop table" included). The first rule that matches anything
decides; more than one match there is ambiguous, and the caller lists the candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.model import Interrupt, Run


@dataclass(frozen=True)
class Candidate:
    id: str
    aliases: tuple[str, ...] = ()


def match_id(query: str, candidates: Iterable[Candidate]) -> list[str]:
    """The ids ``query`` names under the strict rule, sorted: none, exactly one, or the
    ambiguous candidates of the first rule that matched."""
    pool = list(candidates)
    rules: list[Callable[[Candidate], bool]] = [
        lambda c: c.id == query,
        lambda c: query in c.aliases,
        lambda c: c.id.startswith(query) or any(a.startswith(query) for a in c.aliases),
    ]
    for rule in rules:
        found = sorted({c.id for c in pool if rule(c)})
        if found:
            return found
    return []


def run_candidates(runs: Iterable[Run]) -> list[Candidate]:
    return [Candidate(r.id, (r.native_id,)) for r in runs]


def interrupt_candidates(interrupts: Iterable[Interrupt]) -> list[Candidate]:
    out = []
    for intr in interrupts:
        run_native = intr.run_id.partition("/")[2]
        out.append(Candidate(intr.id, (intr.native_id, f"{run_native}#{intr.native_id}")))
    return out


def obligation_alias(obligation_id: str) -> str:
    """``RUN_NATIVE#CALL/RULE``: an obligation id without the run's backend and context (like
    an interrupt's short id); "" when the id has no such form."""
    run_id, _, rest = obligation_id.partition("#")
    run_native = run_id.partition("/")[2]
    return f"{run_native}#{rest}" if run_native and rest else ""
