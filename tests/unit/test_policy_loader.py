"""The policy file: errors name file, rule and key; the version hashes the parsed content."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.policy.engine import PolicyEngine
from console.policy.loader import PolicyError, load_policy, parse_policy, policy_version
from console.policy.model import Policy

BASE = """
default = "permit"

[tool_classes]
payments = []
[tools]
issue_refund = ["payments"]
[data_classes]
sensitive = ["data"]
phi = ["sensitive"]
[datasets.patients]
classes = ["phi"]
[datasets.summary]
derived_from = ["patients"]

[[rules]]
id = "refund-large"
modality = "require_approval"
action = ["issue_refund"]
condition = "args.amount > 100"
description = "large refunds need a human"

[[rules]]
id = "ciso"
modality = "oblige"
object = ["phi"]
what = "notify the CISO"
within_s = 600

[[rules]]
id = "compliance"
modality = "dispense"
teams = ["compliance"]
waives = ["ciso"]
"""


def error_of(text: str) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "policy.toml")
    return str(caught.value)


def test_a_valid_file_parses_with_flat_subject_keys_and_a_version():
    policy = parse_policy(BASE, "policy.toml")
    assert policy.source == "policy.toml"
    assert re.fullmatch(r"sha256:[0-9a-f]{16}", policy.version)
    assert [r.id for r in policy.rules] == ["refund-large", "ciso", "compliance"]
    assert policy.rules[2].subject.teams == ["compliance"]
    assert policy.datasets["summary"].derived_from == ["patients"]


def test_a_syntax_error_in_a_condition_names_file_rule_and_key():
    message = error_of(BASE.replace("args.amount > 100", "args.amount >"))
    assert message.startswith('policy.toml: rule "refund-large": condition: Syntax error')
    assert "(line 1, column 14)" in message


def test_an_unknown_variable_in_a_condition_is_refused():
    message = error_of(BASE.replace("args.amount > 100", "arg.amount > 100"))
    assert message.startswith(
        "policy.toml: rule \"refund-large\": condition: unknown variable 'arg'")
    # names bound by a macro are not variables
    parse_policy(BASE.replace("args.amount > 100", "args.lines.all(l, l.amount < 5)"), "p")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('id = "ciso"', 'id = "refund-large"'),
         'policy.toml: rule "refund-large": id: duplicate id (rule #1 has it too)'),
        (('object = ["phi"]', 'object = ["phy"]'),
         "policy.toml: rule \"ciso\": object: unknown data class or dataset 'phy'"),
        (('waives = ["ciso"]', 'waives = ["cisco"]'),
         "policy.toml: rule \"compliance\": waives: no rule 'cisco'"),
        (('waives = ["ciso"]', 'waives = ["refund-large"]'),
         "policy.toml: rule \"compliance\": waives: rule 'refund-large' is a require_approval "
         "rule, not oblige"),
        (('what = "notify the CISO"', 'what = ""'),
         'policy.toml: rule "ciso": what: an oblige rule must say what is owed'),
        (('description = "large refunds need a human"', 'approvers = 0'),
         'policy.toml: rule "refund-large": approvers: must be at least 1'),
        (('modality = "dispense"', 'modality = "allow"'),
         'policy.toml: rule "compliance": modality: Input should be'),
        (('teams = ["compliance"]', 'temas = ["compliance"]'),
         'policy.toml: rule "compliance": temas: unknown key'),
        (('within_s = 600', 'within_s = "ten minutes"'),
         'policy.toml: rule "ciso": within_s: Input should be a valid number'),
        (('id = "ciso"\n', ''), "policy.toml: rule #2: id: required"),
        (('phi = ["sensitive"]', 'phi = ["sensitive"]\ndata = ["phi"]'),
         "policy.toml: data_classes: cycle "),
        (('derived_from = ["patients"]', 'derived_from = ["patients"]\nclasses = ["phi"]\n'
          '[datasets.patients2]\nderived_from = ["summary"]'), None),
        (('[datasets.summary]\nderived_from = ["patients"]',
          '[datasets.summary]\nderived_from = ["patients", "summary"]'),
         "policy.toml: datasets: lineage cycle summary -> summary"),
        (('derived_from = ["patients"]', 'derived_from = ["patient"]'),
         "policy.toml: datasets.summary.derived_from: unknown dataset 'patient'"),
        (('classes = ["phi"]', 'classes = ["pii"]'),
         "policy.toml: datasets.patients.classes: unknown data class 'pii'"),
        (('issue_refund = ["payments"]', 'issue_refund = ["payment"]'),
         "policy.toml: tools.issue_refund: unknown tool class 'payment'"),
        (('default = "permit"', 'default = "allow"'), "policy.toml: default: Input should be"),
        (('default = "permit"', 'default = "permit"\nmeta = ["priority", "priority"]'),
         "policy.toml: meta: must list priority, specificity and modality once each"),
        (('default = "permit"', 'default = "permit"\nrulez = []'),
         "policy.toml: rulez: unknown top-level key"),
    ],
)
def test_every_validation_names_file_rule_and_key(change, expected):
    old, new = change
    assert old in BASE
    text = BASE.replace(old, new, 1)
    if expected is None:
        parse_policy(text, "policy.toml")
        return
    assert error_of(text).startswith(expected)


def test_a_class_hierarchy_cycle_is_named_in_full():
    text = BASE.replace('phi = ["sensitive"]', 'phi = ["sensitive"]\ndata = ["phi"]')
    assert error_of(text) == (
        "policy.toml: data_classes: cycle sensitive -> data -> phi -> sensitive")


def test_toml_syntax_errors_and_unreadable_files_name_the_file(tmp_path: Path):
    message = error_of(BASE + "\n[[rules]\n")
    assert message.startswith("policy.toml: TOML syntax error:") and "line" in message
    missing = tmp_path / "nope.toml"
    with pytest.raises(PolicyError, match=r"nope\.toml: cannot read the policy file"):
        load_policy(missing)
    path = tmp_path / "policy.toml"
    path.write_text(BASE.replace("args.amount >", "args.amount >>"))
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert str(caught.value).startswith(f'{path}: rule "refund-large": condition:')
    assert (caught.value.source, caught.value.rule, caught.value.key) == (
        str(path), "refund-large", "condition")


def test_a_subject_table_and_flat_keys_are_the_same_policy_but_not_both_for_one_key():
    flat = 'teams = ["compliance"]\nwaives = ["ciso"]'
    assert flat in BASE
    table = BASE.replace(flat, 'waives = ["ciso"]\n[rules.subject]\nteams = ["compliance"]')
    assert parse_policy(table, "a").version == parse_policy(BASE, "b").version
    both = BASE.replace(flat, flat + '\n[rules.subject]\nteams = ["x"]')
    assert error_of(both) == ('policy.toml: rule "compliance": teams: given both flat and in '
                              "[rules.subject]")
    # a key after [rules.subject] belongs to the subject table: said so
    after = BASE.replace(flat, '[rules.subject]\nteams = ["compliance"]\nwaives = ["ciso"]')
    assert error_of(after) == 'policy.toml: rule "compliance": subject.waives: unknown key'


def test_the_version_ignores_formatting_comments_order_of_tables_and_source():
    reformatted = (
        "# the clinic's policy\n" + BASE.replace(" = ", "=").replace("\n\n", "\n\n\n")
        .replace('action = ["issue_refund"]', 'action = "issue_refund"  # one tool')
        .replace('modality = "oblige"', 'modality = "oblige"\npriority = 0')
    )
    assert parse_policy(reformatted, "elsewhere.toml").version == \
        parse_policy(BASE, "policy.toml").version


def test_the_version_changes_when_a_rule_changes():
    base = parse_policy(BASE, "p").version
    assert parse_policy(BASE.replace("> 100", "> 200"), "p").version != base
    assert parse_policy(BASE.replace("within_s = 600", "within_s = 60"), "p").version != base
    assert parse_policy(BASE.replace('default = "permit"', 'default = "prohibit"'),
                        "p").version != base


def test_a_policy_sent_as_json_keeps_its_version_and_builds_the_same_engine():
    policy = parse_policy(BASE, "policy.toml")
    received = Policy.model_validate(policy.model_dump(mode="json"))
    assert policy_version(received) == received.version == policy.version
    assert PolicyEngine(received).version == policy.version


def test_the_engine_refuses_a_policy_built_in_code_with_a_bad_condition():
    policy = parse_policy(BASE, "policy.toml")
    policy.rules[0].condition = "args.amount >"
    with pytest.raises(PolicyError, match=r'rule "refund-large": condition: Syntax error'):
        PolicyEngine(policy)
