"""A require_approval rule's ``deadline`` and ``default_decision``: validated at load, carried
by the engine's approval (and so by the interrupt payload the agent's guard builds), and the
interrupt's ``deadline_at`` counted from its creation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend_adapters.policy_guard import interrupt_policy
from console.gateway.default_decisions import default_decision_key, default_due, default_rule
from console.model import Interrupt, InterruptPolicy
from console.policy.engine import PolicyEngine
from console.policy.loader import PolicyError, parse_policy
from console.policy.model import Invocation

RULE = """
[[rules]]
id = "refund-large"
modality = "require_approval"
action = ["refund"]
{extra}
"""


def _policy(extra: str) -> str:
    return RULE.format(extra=extra)


def test_a_rule_with_deadline_and_default_reject_loads_and_the_approval_carries_both() -> None:
    policy = parse_policy(_policy('deadline = "24h"\ndefault_decision = "reject"\n'
                                  'default_feedback = "too late"'), "p.toml")
    decision = PolicyEngine(policy).evaluate(Invocation(tool="refund"))
    assert decision.approval is not None
    assert decision.approval.deadline_s == 86400.0
    assert decision.approval.default_decision == "reject"
    assert any("reject by default" in line for line in decision.explanation)
    payload = interrupt_policy(decision)
    assert payload["deadline_s"] == 86400.0 and payload["default_decision"] == "reject"


def test_a_rule_without_deadline_keeps_the_payload_as_it_was() -> None:
    decision = PolicyEngine(parse_policy(_policy(""), "p.toml")).evaluate(Invocation(tool="refund"))
    assert "deadline_s" not in interrupt_policy(decision)
    assert "default_decision" not in interrupt_policy(decision)


@pytest.mark.parametrize(("extra", "key", "words"), [
    ('default_decision = "reject"', "default_decision", "needs a deadline"),
    ('deadline = "soon"', "deadline", "not a duration"),
    ('deadline = "1h"\ndefault_decision = "approve"\ndecisions = ["reject"]', "default_decision",
     "not among"),
    ('deadline = "1h"\ndefault_decision = "approve"\napprovers = 2', "default_decision",
     "four-eyes"),
    ('default_feedback = "x"', "default_feedback", "goes with"),
    ('deadline = "1h"\ndefault_decision = "edit"', "default_decision", ""),
])
def test_a_default_decision_is_refused_where_the_rule_cannot_hold_it(
    extra: str, key: str, words: str,
) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(_policy(extra), "p.toml")
    assert f"{key}:" in str(err.value) and words in str(err.value)


def test_only_a_require_approval_rule_has_a_deadline() -> None:
    text = '[[rules]]\nid = "r"\nmodality = "permit"\ndeadline = "1h"\n'
    with pytest.raises(PolicyError, match="only a require_approval rule"):
        parse_policy(text, "p.toml")


def _interrupt(policy: InterruptPolicy | None, created: datetime) -> Interrupt:
    return Interrupt(id="dbos:local/r#1", run_id="dbos:local/r", native_id="1", title="t",
                     created_at=created, policy=policy)


def test_the_interrupts_deadline_counts_from_its_creation_unless_a_timer_set_one() -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    intr = _interrupt(InterruptPolicy(rule="r", deadline_s=60), created)
    assert intr.deadline_at == created + timedelta(seconds=60)
    timer = created + timedelta(seconds=5)
    native = Interrupt(id="a#1", run_id="a", native_id="1", title="t", created_at=created,
                       deadline_at=timer, policy=InterruptPolicy(rule="r", deadline_s=60))
    assert native.deadline_at == timer
    assert _interrupt(None, created).deadline_at is None


def test_the_gateway_decides_by_its_own_rule_never_by_the_agents_payload() -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    loaded = parse_policy(_policy('deadline = "2s"\ndefault_decision = "reject"'), "p.toml")
    claimed = InterruptPolicy(rule="refund-large", deadline_s=1, default_decision="approve")
    intr = _interrupt(claimed, created)
    rule = default_rule(intr, loaded.rules)
    assert rule is not None and rule.default_decision == "reject"
    assert default_due(intr, rule) == created + timedelta(seconds=2)
    plain = parse_policy(_policy(""), "p.toml")
    assert default_rule(intr, plain.rules) is None  # the payload alone decides nothing
    unknown = _interrupt(InterruptPolicy(rule="other", default_decision="reject"), created)
    assert default_rule(unknown, loaded.rules) is None


def test_the_default_decisions_key_is_stable_and_fits_a_command_id() -> None:
    long_id = "dbos:local/" + "x" * 300 + "#1"
    assert default_decision_key(long_id) == default_decision_key(long_id)
    assert len(default_decision_key(long_id)) <= 128
    assert default_decision_key("a#1") != default_decision_key("a#2")
