"""``irq policy test FILE``: run_cases passes and fails cases with the reason; invalid files
name file, case and key. And explain_text for an operator command."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.policy.cases import run_cases
from console.policy.engine import PolicyEngine
from console.policy.explain import explain_text
from console.policy.loader import PolicyError, parse_policy
from console.policy.model import Invocation

POLICY = """
[[rules]]
id = "refund-small"
modality = "permit"
action = ["issue_refund"]
condition = "args.amount <= 100"

[[rules]]
id = "refund-large"
modality = "require_approval"
action = ["issue_refund"]
condition = "args.amount > 100"

[[rules]]
id = "log"
modality = "oblige"
action = ["issue_refund"]
what = "log the refund"

[[rules]]
id = "finance-no-log"
modality = "dispense"
teams = ["finance"]
waives = ["log"]
"""

CASES = """
policy = "policy.toml"

[[cases]]
name = "small"
expect_outcome = "permit"
expect_winner = "refund-small"
expect_rules = ["refund-small", "log"]
expect_obligations = ["log"]
expect_waived = []
invocation = { tool = "issue_refund", args = { amount = 40 } }

[[cases]]
name = "large by finance"
expect_outcome = "require_approval"
expect_winner = "refund-large"
expect_obligations = []
expect_waived = ["log"]
[cases.invocation]
tool = "issue_refund"
args = { amount = 400 }
team = "finance"

[[cases]]
name = "another tool falls to the default"
expect_outcome = "permit"
expect_winner = ""
invocation = { tool = "send_mail" }
"""


def write(tmp_path: Path, cases: str, policy: str = POLICY) -> Path:
    (tmp_path / "policy.toml").write_text(policy)
    path = tmp_path / "cases.toml"
    path.write_text(cases)
    return path


def test_every_case_passes_and_the_report_carries_the_decisions(tmp_path: Path):
    report = run_cases(write(tmp_path, CASES))
    assert (report.passed, report.failed) == (3, 0)
    assert [c.name for c in report.cases] == ["small", "large by finance",
                                              "another tool falls to the default"]
    assert report.policy == str(tmp_path / "policy.toml")
    assert report.policy_version == parse_policy(POLICY, "x").version
    assert report.cases[1].waived == ["log"]
    assert report.cases[1].decision.winner == "refund-large"


def test_a_failed_case_says_what_differed(tmp_path: Path):
    broken = (CASES.replace('expect_winner = "refund-small"', 'expect_winner = "refund-large"')
              .replace('expect_waived = ["log"]', 'expect_waived = []')
              .replace('expect_outcome = "require_approval"', 'expect_outcome = "prohibit"'))
    report = run_cases(write(tmp_path, broken))
    assert (report.passed, report.failed) == (1, 2)
    small, large, _ = report.cases
    assert not small.passed
    assert small.reason == 'expected winner "refund-large", got "refund-small"'
    assert not large.passed
    assert large.reason == (
        'expected outcome prohibit, got require_approval (winner "refund-large"); '
        "expected waived obligations none, got [log]"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('policy = "policy.toml"', ""), "cases.toml: policy: required"),
        (('expect_outcome = "permit"\nexpect_winner = "refund-small"',
          'expect_outcome = "allow"\nexpect_winner = "refund-small"'),
         'cases.toml: case "small": expect_outcome: must be one of'),
        (('expect_waived = []', 'expect_waved = []'), 'cases.toml: case "small": expect_waved: '
                                                     "unknown key"),
        (('tool = "send_mail"', 'tol = "send_mail"'),
         'cases.toml: case "another tool falls to the default": invocation.tool: required'),
    ],
)
def test_an_invalid_cases_file_names_the_file_case_and_key(tmp_path: Path, change, expected):
    old, new = change
    assert old in CASES
    with pytest.raises(PolicyError) as caught:
        run_cases(write(tmp_path, CASES.replace(old, new, 1)))
    assert str(caught.value).startswith(str(tmp_path / expected))


def test_an_invalid_policy_under_test_is_a_policy_error_naming_the_policy_file(tmp_path: Path):
    with pytest.raises(PolicyError) as caught:
        run_cases(write(tmp_path, CASES, POLICY.replace("<= 100", "<=")))
    assert str(caught.value).startswith(
        f'{tmp_path / "policy.toml"}: rule "refund-small": condition: Syntax error')


def test_explain_text_for_an_operator_command_prohibited_by_a_rule():
    engine = PolicyEngine(parse_policy(
        '[[rules]]\nid = "lock-reason"\non = "command"\nmodality = "prohibit"\n'
        'action = ["cancel"]\nobject = ["lock"]\ncondition = "cmd.reason == \\"\\""\n'
        'description = "cancelling a run that holds a prod lock needs a reason"\n',
        "policy.toml",
    ))
    inv = Invocation(on="command", tool="cancel", identity="alice", role="operator",
                     run_id="dbos:prod/r1", resources=[{"id": "db", "kind": "lock"}])
    prose = explain_text(engine.evaluate(inv), inv)
    lines = prose.splitlines()
    assert lines[0] == ("operator alice (role operator) running cancel on run dbos:prod/r1 "
                        "with no reason given: prohibited.")
    assert any(line.startswith('  - prohibit "lock-reason"') and "lock resource" in line
               for line in lines)
    assert any(line.startswith('Winner: "lock-reason"') and "needs a reason" in line
               for line in lines)
