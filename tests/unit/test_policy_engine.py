"""PolicyEngine: matching, the meta-policy, obligations and dispensations, explanations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from console.policy.engine import PolicyEngine
from console.policy.explain import explain_text
from console.policy.loader import parse_policy
from console.policy.model import Invocation, Waiver

CLINIC = """
[tool_classes]
data_egress = []
report = ["data_egress"]
[tools]
export_report = ["report"]
read_dataset = []
[data_classes]
data = []
sensitive = ["data"]
phi = ["sensitive"]
[datasets.patients]
classes = ["phi"]
[datasets.cohort]
derived_from = ["patients"]
[datasets.monthly_summary]
derived_from = ["cohort"]
[datasets.web_traffic]
classes = ["data"]

[[rules]]
id = "reports-permit"
modality = "permit"
action = ["report"]
description = "reports may be exported"

[[rules]]
id = "phi-export-approval"
modality = "require_approval"
action = ["export_report"]
object = ["phi"]
description = "PHI leaves only with a human's approval"
decide_role = "admin"
approvers = 2
decisions = ["approve", "reject"]

[[rules]]
id = "ciso-notify"
modality = "oblige"
object = ["phi"]
what = "notify the CISO"
within_s = 600

[[rules]]
id = "compliance-dispensation"
modality = "dispense"
teams = ["compliance"]
waives = ["ciso-notify"]
description = "the compliance team reports to the CISO itself"
"""


def engine(text: str) -> PolicyEngine:
    return PolicyEngine(parse_policy(text, "policy.toml"))


def rules(*tables: str, head: str = "") -> str:
    return head + "\n".join(f"[[rules]]\n{t.strip()}\n" for t in tables)


def call(tool: str = "t", **kw: Any) -> Invocation:
    return Invocation(tool=tool, **kw)


# ---------------------------------------------------------------------- the "Done when" case


def test_export_over_data_derived_from_phi_outside_compliance_needs_approval_and_obliges():
    decision = engine(CLINIC).evaluate(
        call("export_report", agent="analytics-agent", team="research",
             data=["monthly_summary"], args={"dataset": "monthly_summary"})
    )
    assert decision.outcome == "require_approval"
    assert decision.rules == ["reports-permit", "phi-export-approval", "ciso-notify"]
    assert decision.winner == "phi-export-approval"
    assert len(decision.conflicts) == 1
    assert '"phi-export-approval"' in decision.conflicts[0]
    assert '"reports-permit"' in decision.conflicts[0]
    assert "specificity" in decision.conflicts[0]  # equal priority: the exact tool wins
    assert [(o.rule, o.what, o.within_s) for o in decision.obligations] == [
        ("ciso-notify", "notify the CISO", 600)
    ]
    assert decision.waived == []
    assert decision.approval is not None
    assert (decision.approval.rule, decision.approval.decide_role, decision.approval.approvers,
            decision.approval.decisions) == ("phi-export-approval", "admin", 2,
                                             ["approve", "reject"])
    text = "\n".join(decision.explanation)
    for rule in decision.rules:
        assert f'"{rule}"' in text
    # lineage is explained: monthly_summary <- cohort <- patients (phi)
    assert "monthly_summary is derived from patients, which is phi" in text
    assert 'outcome require_approval, decided by require_approval "phi-export-approval"' in text
    assert 'obligation "ciso-notify": notify the CISO within 600 s' in text
    assert decision.policy_version is not None and decision.policy_version.startswith("sha256:")


def test_the_same_export_by_the_compliance_team_waives_the_obligation_naming_the_dispensation():
    decision = engine(CLINIC).evaluate(
        call("export_report", agent="compliance-agent", team="compliance",
             data=["monthly_summary"])
    )
    assert decision.outcome == "require_approval"
    assert decision.winner == "phi-export-approval"
    assert "compliance-dispensation" in decision.rules
    assert decision.obligations == []
    assert decision.waived == [Waiver(obligation_rule="ciso-notify", by="compliance-dispensation")]
    text = "\n".join(decision.explanation)
    assert 'obligation "ciso-notify" (notify the CISO) waived by dispensation ' \
           '"compliance-dispensation"' in text


def test_explain_text_names_outcome_rules_conflict_winner_obligation_and_version():
    inv = call("export_report", agent="analytics-agent", team="research", data=["monthly_summary"])
    decision = engine(CLINIC).evaluate(inv)
    prose = explain_text(decision, inv)
    lines = prose.splitlines()
    assert lines[0] == ("agent analytics-agent (team research) calling export_report over "
                        "monthly_summary: needs a human's approval.")
    assert "3 rules matched:" in lines
    assert any(line.startswith("Conflict: ") for line in lines)
    assert any(line.startswith('Winner: "phi-export-approval"') and "specificity" in line
               for line in lines)
    assert "Approval: 2 different approvers with role admin or above may approve or reject." \
        in lines
    assert 'Obligation (rule "ciso-notify"): notify the CISO within 10 min (600 s).' in lines
    assert lines[-1] == f"Policy version: {decision.policy_version}."


def test_an_export_of_plain_data_is_permitted_by_the_general_rule_alone():
    decision = engine(CLINIC).evaluate(call("export_report", data=["web_traffic"]))
    assert (decision.outcome, decision.winner, decision.rules) == (
        "permit", "reports-permit", ["reports-permit"])
    assert decision.conflicts == [] and decision.obligations == [] and decision.approval is None


# ------------------------------------------------------------------------------ meta-policy


def test_no_deciding_rule_falls_back_to_the_policy_default_and_says_so():
    permit = engine(rules('id = "o"\nmodality = "oblige"\nwhat = "log it"'))
    decision = permit.evaluate(call())
    assert (decision.outcome, decision.winner) == ("permit", None)
    assert [o.rule for o in decision.obligations] == ["o"]
    assert "the policy default applies" in decision.explanation[-2]
    deny = engine(rules(head='default = "prohibit"\n'))
    decision = deny.evaluate(call())
    assert (decision.outcome, decision.winner, decision.rules) == ("prohibit", None, [])


def test_priority_beats_specificity_and_meta_may_put_specificity_first():
    body = rules(
        'id = "general-prohibit"\nmodality = "prohibit"\npriority = 5',
        'id = "exact-permit"\nmodality = "permit"\naction = ["t"]\npriority = 1',
    )
    decision = engine(body).evaluate(call("t"))
    assert decision.winner == "general-prohibit"
    assert "higher priority (5 > 1)" in decision.conflicts[0]
    reordered = engine('meta = ["specificity", "priority", "modality"]\n' + body)
    decision = reordered.evaluate(call("t"))
    assert (decision.outcome, decision.winner) == ("permit", "exact-permit")
    assert "higher specificity (1000 > 0)" in decision.conflicts[0]


@pytest.mark.parametrize(
    ("modalities", "winner"),
    [
        (["permit", "prohibit"], "prohibit"),
        (["permit", "require_approval"], "require_approval"),
        (["require_approval", "prohibit", "permit"], "prohibit"),
    ],
)
def test_equal_priority_and_specificity_prohibit_beats_approval_beats_permit(modalities, winner):
    body = rules(*(f'id = "{m}"\nmodality = "{m}"\naction = ["t"]' for m in modalities))
    decision = engine(body).evaluate(call("t"))
    assert (decision.outcome, decision.winner) == (winner, winner)
    assert all(f"{winner} beats" in c for c in decision.conflicts)
    assert len(decision.conflicts) == len(modalities) - 1


def test_specificity_exact_tool_over_deeper_class_over_shallower_class_over_any():
    head = """
[tool_classes]
root = []
mid = ["root"]
leaf = ["mid"]
[tools]
t = ["leaf"]
"""
    body = rules(
        'id = "any"\nmodality = "prohibit"',
        'id = "root"\nmodality = "permit"\naction = ["root"]',
        'id = "leaf"\nmodality = "prohibit"\naction = ["leaf"]',
        'id = "exact"\nmodality = "permit"\naction = ["t"]',
        head=head,
    )
    decision = engine(body).evaluate(call("t"))
    spec = {m.id: m.specificity for m in decision.matched}
    assert spec["exact"] > spec["leaf"] > spec["root"] > spec["any"]
    assert decision.winner == "exact"
    assert "t is in tool class leaf" in next(m.why for m in decision.matched if m.id == "leaf")


def test_subject_constraints_and_conditions_add_specificity():
    body = rules(
        'id = "general"\nmodality = "permit"\naction = ["t"]',
        'id = "billing"\nmodality = "prohibit"\naction = ["t"]\nagents = ["billing-*"]',
    )
    e = engine(body)
    decision = e.evaluate(call("t", agent="billing-eu"))
    assert decision.winner == "billing"
    assert "agent billing-eu matches billing-*" in decision.matched[1].why
    assert e.evaluate(call("t", agent="support")).winner == "general"


def test_a_prohibit_opens_no_obligation_and_says_why():
    body = rules(
        'id = "no"\nmodality = "prohibit"',
        'id = "owe"\nmodality = "oblige"\nwhat = "tell someone"',
    )
    decision = engine(body).evaluate(call())
    assert decision.outcome == "prohibit"
    assert decision.obligations == [] and decision.waived == []
    assert 'no obligation opened ("owe"): the call is prohibited' in decision.explanation


def test_a_dispensation_waives_only_what_it_names_and_only_when_it_matches():
    body = rules(
        'id = "a"\nmodality = "oblige"\nwhat = "A"',
        'id = "b"\nmodality = "oblige"\nwhat = "B"\nwithin_s = 60',
        'id = "c"\nmodality = "oblige"\nwhat = "C"\ncondition = "args.n > 1"',
        'id = "d1"\nmodality = "dispense"\nwaives = ["a", "c"]\nteams = ["x"]',
        'id = "d2"\nmodality = "dispense"\nwaives = ["a"]\nteams = ["x"]',
    )
    e = engine(body)
    decision = e.evaluate(call(team="x", args={"n": 0}))
    assert [o.rule for o in decision.obligations] == ["b"]
    assert decision.waived == [Waiver(obligation_rule="a", by="d1")]  # c did not match
    decision = e.evaluate(call(team="y", args={"n": 5}))
    assert [o.rule for o in decision.obligations] == ["a", "b", "c"]
    assert decision.waived == []


# ------------------------------------------------------------------------------- conditions


def test_a_condition_that_fails_at_run_time_does_not_match_and_is_explained():
    body = rules(
        'id = "big"\nmodality = "prohibit"\ncondition = "args.amount > 100"',
        'id = "odd"\nmodality = "prohibit"\ncondition = "args.amount"',
    )
    e = engine(body)
    decision = e.evaluate(call(args={"currency": "EUR"}))
    assert (decision.outcome, decision.rules) == ("permit", [])
    assert any('rule "big" did not match: its condition failed at run time (KeyError' in line
               for line in decision.explanation)
    decision = e.evaluate(call(args={"amount": 250}))
    assert decision.rules == ["big"]
    assert 'rule "odd" did not match: its condition returned 250, not a bool' \
        in decision.explanation
    assert e.evaluate(call(args={"amount": 99.5})).rules == []


def test_conditions_read_agent_run_data_datasets_and_now():
    at = datetime(2026, 12, 1, 23, 30, tzinfo=UTC)
    body = rules(
        'id = "night"\nmodality = "prohibit"\n'
        'condition = "now > timestamp(\\"2026-12-01T22:00:00Z\\")"',
        'id = "who"\nmodality = "oblige"\nwhat = "w"\n'
        'condition = "agent.team == \\"x\\" && run.backend == \\"dbos\\" && run.id == \\"r1\\""',
        'id = "lineage"\nmodality = "oblige"\nwhat = "l"\n'
        'condition = "\\"phi\\" in data && \\"patients\\" in datasets"',
        head=CLINIC.split("[[rules]]")[0],
    )
    e = engine(body)
    inv = call("read_dataset", team="x", backend="dbos", run_id="r1", data=["cohort"], at=at)
    decision = e.evaluate(inv)
    assert decision.rules == ["night", "who", "lineage"]
    assert e.evaluate(inv.model_copy(update={"at": at.replace(hour=21)})).outcome == "permit"


def test_args_cel_cannot_take_are_passed_as_json_and_other_conditions_still_work():
    e = engine(rules('id = "r"\nmodality = "prohibit"\ncondition = "args.n == 3"'))
    assert e.evaluate(call(args={"n": 3, "tags": {"a"}})).outcome == "prohibit"


# -------------------------------------------------------------------------- command rules


def test_command_rules_govern_commands_only_and_match_resource_kinds():
    body = rules(
        'id = "prod-lock-reason"\non = "command"\nmodality = "prohibit"\naction = ["cancel"]\n'
        'object = ["lock"]\ncondition = "cmd.reason == \\"\\""\n'
        'description = "a run holding a prod lock is cancelled only with a reason"',
        'id = "tool-cancel"\nmodality = "require_approval"\naction = ["cancel"]',
    )
    e = engine(body)
    locked = [{"id": "prod-db", "kind": "lock"}]
    decision = e.evaluate(Invocation(on="command", tool="cancel", identity="alice",
                                     role="operator", resources=locked))
    assert (decision.outcome, decision.rules) == ("prohibit", ["prod-lock-reason"])
    assert "the run holds a lock resource" in decision.matched[0].why
    with_reason = Invocation(on="command", tool="cancel", reason="stuck", resources=locked)
    assert e.evaluate(with_reason).outcome == "permit"
    no_lock = Invocation(on="command", tool="cancel", resources=[{"id": "g", "kind": "gpu"}])
    assert e.evaluate(no_lock).rules == []
    # an agent tool that happens to be called "cancel" meets only the tool rule
    assert e.evaluate(call("cancel", resources=locked)).rules == ["tool-cancel"]


def test_four_eyes_rule_for_approving_a_prod_deploy_by_role():
    body = rules(
        'id = "prod-deploy"\non = "command"\nmodality = "require_approval"\n'
        'action = ["approve"]\nroles = ["operator", "admin"]\napprovers = 2\n'
        'condition = "interrupt.action == \\"deploy\\" && interrupt.args.env == \\"prod\\""',
    )
    decision = engine(body).evaluate(Invocation(
        on="command", tool="approve", role="admin", identity="bob",
        interrupt={"action": "deploy", "args": {"env": "prod"}},
    ))
    assert decision.approval is not None and decision.approval.approvers == 2
    assert "role admin" in decision.matched[0].why


# ------------------------------------------------------------------------- index, sensitive


def test_rules_for_other_tools_are_not_candidates_and_their_conditions_never_run():
    body = rules(
        'id = "other"\nmodality = "prohibit"\naction = ["drop_table"]\ncondition = "args.x > 1"',
        'id = "mine"\nmodality = "prohibit"\naction = ["refund"]\ncondition = "args.amount > 1"',
        'id = "glob"\nmodality = "oblige"\naction = ["ref*"]\nwhat = "w"',
    )
    e = engine(body)
    decision = e.evaluate(call("refund", args={"amount": 5}))
    assert decision.rules == ["mine", "glob"]
    assert not any('"other"' in line for line in decision.explanation)  # never evaluated
    assert [c.compiled.rule.id for c in e.candidates("tool", "refund")] == ["mine", "glob"]
    assert [c.compiled.rule.id for c in e.candidates("tool", "drop_table")] == ["other"]


def test_sensitive_tools_by_name_and_by_class():
    head = '[tool_classes]\ndestructive = []\n[tools]\ndelete_backup = ["destructive"]\n' \
           'drop_table = ["destructive"]\nread = []\n'
    e = engine(rules(
        'id = "d"\nmodality = "require_approval"\naction = ["destructive"]\nsensitive = true',
        'id = "w"\nmodality = "prohibit"\naction = ["wire_money"]\nsensitive = true',
        'id = "r"\nmodality = "permit"\naction = ["read"]',
        'id = "g"\nmodality = "prohibit"\naction = ["purge_*"]\nsensitive = true',
        head=head,
    ))
    assert e.sensitive_tools() == {"delete_backup", "drop_table", "wire_money"}
    assert e.is_sensitive("drop_table") and not e.is_sensitive("read")
    assert e.is_sensitive("purge_logs")  # undeclared, covered by a sensitive glob
    assert not e.is_sensitive("something_else")
    assert engine(rules('id = "all"\nmodality = "oblige"\nwhat = "w"\nsensitive = true')) \
        .is_sensitive("anything")
    assert e.version == e.policy.version
