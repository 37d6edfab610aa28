"""``no_workers`` (and whatever else an adapter reports about its backend): the conditions
each backend context reported in its latest poll (``Observation.conditions``: a Temporal task
queue nobody polls, a DBOS queue with work and no live executor, a Restate deployment that
does not answer). The gateway keeps the last poll's list per context; a context that stops
reporting a condition ends it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from console.alert_model import Condition


def no_workers(latest: Mapping[str, Sequence[Condition]]) -> list[Condition]:
    """``latest``: ``BACKEND:CONTEXT`` -> the conditions of its last successful poll."""
    out: list[Condition] = []
    for key, conditions in latest.items():
        backend, _, context = key.partition(":")
        for cond in conditions:
            if not cond.backend:  # the adapter left its own context out: it is this one
                cond = Condition(kind=cond.kind, subject=cond.subject, detail=cond.detail,
                                 action=cond.action, run=cond.run, backend=backend,
                                 context=context, since=cond.since, attempt=cond.attempt,
                                 facts=cond.facts)
            out.append(cond)
    return out
