"""Checking a decision before an adapter sends it: the one decision check
(console/decision_check.py), raised as the adapter's InvalidInput ("decision refused: ...")."""

from __future__ import annotations

from collections.abc import Sequence

from backend_adapters.base import InvalidInput
from console.decision_check import calls_problem, decision_problem, handler_problem
from console.model import Decision, Interrupt


def refuse_invalid_decision(
    kind: str,
    allowed: Sequence[str],
    *,
    args: object = None,
    schema: object | None = None,
    target: str = "",
) -> None:
    """Raise InvalidInput when ``kind`` is not allowed or edited ``args`` fail ``schema``."""
    problem = decision_problem(kind, allowed, args=args, schema=schema)
    if problem is not None:
        raise InvalidInput(f"decision refused: {problem}", target=target)


def refuse_decision(interrupt: Interrupt, decision: Decision, *, target: str) -> None:
    """:func:`refuse_invalid_decision` of ``decision`` against what ``interrupt`` allows,
    and for native waits which handler answers (and its schema) or, for a batched interrupt,
    one allowed decision per call (console/decision_check.py)."""
    if interrupt.actions:
        problem = calls_problem(interrupt, decision)
        if problem is not None:
            raise InvalidInput(f"decision refused: {problem}", target=target)
        return
    refuse_invalid_decision(
        decision.kind.value,
        [d.value for d in interrupt.allowed_decisions],
        args=decision.args,
        schema=interrupt.args_schema,
        target=target,
    )
    problem = handler_problem(interrupt, decision)
    if problem is not None:
        raise InvalidInput(f"decision refused: {problem}", target=target)
