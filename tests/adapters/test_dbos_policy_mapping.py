"""Interrupts carry the policy rule that raised them: every adapter's payload -> Interrupt
mapping copies ``policy`` (validated; a malformed one is dropped, the interrupt is kept)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from backend_adapters.dbos.mapping import interrupt_from_payload
from backend_adapters.langgraph.interrupt_shapes import interrupt_from_value
from backend_adapters.restate.state_mapping import interrupt_of
from backend_adapters.temporal.state_mapping import interrupts_from_shape
from console.model import Interrupt

POLICY = {
    "rule": "refund-large",
    "why": "refunds over 100 EUR need a human",
    "decide_role": "admin",
    "approvers": 2,
    "policy_version": "sha256:0123456789abcdef",
}
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _payload(policy: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "interrupt_id": "wf-1/1",
        "awakeable_id": "sign_1abc",
        "title": "refund: approval required by refund-large",
        "action": "refund",
        "args": {"amount": 250},
        "allowed_decisions": ["approve", "reject"],
        "created_at": NOW.isoformat(),
    }
    if policy is not None:
        out["policy"] = policy
    return out


def _all_mappings(policy: Any) -> list[Interrupt]:
    payload = _payload(policy)
    dbos = interrupt_from_payload(payload, run_id="dbos:x:wf-1")
    assert dbos is not None
    (temporal,) = interrupts_from_shape("temporal:x:wf-1", [payload], fallback_created_at=NOW)
    restate = interrupt_of(payload, run_id="restate:x:inv-1")  # type: ignore[arg-type]
    tool_approval = {"type": "tool_approval", "name": "refund", "args": {"amount": 250}}
    if policy is not None:
        tool_approval["policy"] = policy
    inbox_request = {
        "action_request": {"action": "refund", "args": {"amount": 250}},
        "config": {"allow_accept": True, "allow_ignore": True},
        "description": "refund",
        **({"policy": policy} if policy is not None else {}),
    }
    langgraph = [
        interrupt_from_value(v, run_id="langgraph:x:t", native_id="i1", created_at=NOW)
        for v in (tool_approval, [inbox_request])
    ]
    return [dbos, temporal, restate, *langgraph]


def test_every_adapter_copies_the_policy_into_the_interrupt() -> None:
    for interrupt in _all_mappings(POLICY):
        assert interrupt.policy is not None, interrupt
        assert interrupt.policy.rule == "refund-large"
        assert interrupt.policy.decide_role == "admin"
        assert interrupt.policy.approvers == 2
        contract = interrupt.contract(NOW)
        assert contract["policy"] == {**POLICY, "approvals": []}


@pytest.mark.parametrize(
    "bad",
    [None, "refund-large", {"why": "no rule"}, {"rule": "r", "approvers": "many"}, [POLICY]],
)
def test_a_missing_or_malformed_policy_maps_to_none_and_keeps_the_interrupt(bad: Any) -> None:
    for interrupt in _all_mappings(bad):
        assert interrupt.policy is None
        assert interrupt.action == "refund"
        assert interrupt.contract(NOW)["policy"] is None
