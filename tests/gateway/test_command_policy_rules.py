"""command_policy.py with the real policy engine: what a command rule and an interrupt's rule
refuse, and how an untrusted interrupt payload is read (never laxer than the loaded policy)."""

from __future__ import annotations

from console.gateway.command_policy import (
    command_refusal,
    interrupt_rule,
    recorded_text,
    role_refusal,
    run_invocation,
)
from console.model import Interrupt, InterruptPolicy, Resource, Role, Run
from console.policy.engine import PolicyEngine
from console.policy.loader import parse_policy

POLICY = """
[[rules]]
id = "cancel-prod-lock-needs-reason"
on = "command"
modality = "prohibit"
action = ["cancel"]
condition = 'cmd.reason == "" && resources.exists(r, r.kind == "lock" && r.id.startsWith("prod"))'
description = "a run holding a prod lock is cancelled only with a reason"

[[rules]]
id = "reject-needs-admin"
on = "command"
modality = "require_approval"
action = ["reject"]
condition = 'interrupt.action == "drop_table"'
decide_role = "admin"
description = "only admins turn down a table drop"

[[rules]]
id = "prod-deploy-four-eyes"
modality = "require_approval"
action = ["deploy"]
approvers = 3
decide_role = "admin"
description = "a prod deploy needs three admins"
"""
ENGINE = PolicyEngine(parse_policy(POLICY, "policy.toml"))
RUN = Run(id="dbos:local/wf-1", backend="dbos", context="local", native_id="wf-1", name="wf-1",
          resources=[Resource(id="prod-db", kind="lock")])


def _intr(action: str, policy: dict | None = None) -> Interrupt:
    return Interrupt(id="dbos:local/wf-1#wf-1/1", run_id=RUN.id, native_id="wf-1/1",
                     title=action, action=action,
                     policy=InterruptPolicy.from_payload(policy))


def test_a_prohibit_names_the_rule_and_a_reason_lifts_it():
    without = run_invocation("cancel", RUN, identity="alice", role="operator", reason="")
    assert command_refusal(ENGINE, without) == (
        "forbidden by policy rule cancel-prod-lock-needs-reason: "
        "a run holding a prod lock is cancelled only with a reason")
    given = run_invocation("cancel", RUN, identity="alice", role="operator", reason="stuck")
    assert command_refusal(ENGINE, given) is None
    assert command_refusal(None, without) is None  # no policy loaded: nothing changes
    free = RUN.model_copy(update={"resources": [Resource(id="dev-db", kind="lock")]})
    assert command_refusal(ENGINE, run_invocation(
        "cancel", free, identity="alice", role="operator", reason="")) is None


def test_require_approval_on_a_command_needs_the_decide_role():
    intr = _intr("drop_table")
    operator = run_invocation("reject", RUN, identity="alice", role="operator", reason="",
                              interrupt=intr)
    refused = command_refusal(ENGINE, operator)
    assert refused is not None and refused.startswith("forbidden by policy rule reject-needs-admin")
    assert "role admin" in refused and "alice has role operator" in refused
    admin = operator.model_copy(update={"role": "admin", "identity": "root"})
    assert command_refusal(ENGINE, admin) is None
    other = run_invocation("reject", RUN, identity="alice", role="operator", reason="",
                           interrupt=_intr("deploy"))
    assert command_refusal(ENGINE, other) is None


def test_an_interrupt_payload_is_never_laxer_than_the_loaded_rule():
    lax = _intr("deploy", {"rule": "prod-deploy-four-eyes", "approvers": 1,
                           "decide_role": "operator"})
    rule = interrupt_rule(lax, ENGINE)
    assert rule is not None and rule.approvers == 3 and rule.decide_role is Role.ADMIN
    assert rule.why == "a prod deploy needs three admins"
    assert role_refusal(rule, identity="alice", role=Role.OPERATOR) is not None
    assert role_refusal(rule, identity="root", role=Role.ADMIN) is None
    assert recorded_text(rule, "root", 1) == (
        "approval 1 of 3 recorded by root under rule prod-deploy-four-eyes; "
        "needs 2 more approvers")
    # without a loaded policy the payload's own rule applies; an unknown role reads as admin
    alone = interrupt_rule(lax, None)
    assert alone is not None and alone.approvers == 1 and alone.decide_role is Role.OPERATOR
    odd = interrupt_rule(_intr("deploy", {"rule": "x", "decide_role": "superuser"}), None)
    assert odd is not None and odd.decide_role is Role.ADMIN
    assert interrupt_rule(_intr("deploy"), ENGINE) is None
