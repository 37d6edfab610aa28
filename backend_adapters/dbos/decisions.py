"""Checking a decision before it is sent to a DBOS agent: the one decision check
(console/decision_check.py), raised as the adapter's InvalidInput."""

from __future__ import annotations

from collections.abc import Sequence

from backend_adapters.base import InvalidInput
from console.decision_check import decision_problem


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
