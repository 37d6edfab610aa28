"""Answers to the policy layer's queries: ``policy``, ``policy_check`` and ``obligations``."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from console.gateway.obligation_store import ObligationStore
from console.gateway.policy_state import PolicyState
from console.gateway.protocol import FrameError, Query
from console.policy.model import Invocation


def answer_policy_query(q: Query, state: PolicyState, store: ObligationStore) -> Any:
    if q.what == "policy":
        return state.describe()
    if q.what == "obligations":
        return [ob.model_dump(mode="json")
                for ob in store.listing(state=q.state, run_id=q.run_id, limit=q.limit)]
    # policy_check
    if q.invocation is None:
        raise FrameError("invalid", "policy_check needs 'invocation' (an Invocation)", q.id)
    try:
        invocation = Invocation.model_validate(q.invocation)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise FrameError("invalid", f"invocation.{where}: {first['msg']}", q.id) from None
    engine = state.engine
    if engine is None:
        raise FrameError("not_found", "no policy loaded", q.id)
    return engine.evaluate(invocation).model_dump(mode="json")
