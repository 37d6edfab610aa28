"""Policy test cases, like ``opa test``: ``irq policy test FILE``.

File format (TOML)::

    policy = "policy.toml"                 # relative to this file
    [[cases]]
    name = "a 250 EUR refund needs approval"
    expect_outcome = "require_approval"    # permit | prohibit | require_approval
    expect_winner = "refund-approval"      # optional; "" expects the policy default
    expect_rules = ["refund-approval"]     # optional: exactly the rules that match
    expect_obligations = ["ciso-notify"]   # optional: the obligations that stand
    expect_waived = []                     # optional: the obligation rules waived
    [cases.invocation]                     # an Invocation
    tool = "issue_refund"
    args = { amount = 250 }

An invalid file (or policy) raises ``PolicyError`` naming the file, the case and the key.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from console.policy.engine import PolicyEngine
from console.policy.loader import PolicyError, load_policy
from console.policy.model import Invocation, PolicyDecision

_OUTCOMES = ("permit", "prohibit", "require_approval")
_CASE_KEYS = ("name", "invocation", "expect_outcome", "expect_winner", "expect_rules",
              "expect_obligations", "expect_waived")


class CaseResult(BaseModel):
    name: str
    passed: bool
    reason: str = ""  # what differed, when failed
    outcome: str
    winner: str | None = None
    rules: list[str] = Field(default_factory=list)
    obligations: list[str] = Field(default_factory=list)
    waived: list[str] = Field(default_factory=list)
    decision: PolicyDecision


class CaseReport(BaseModel):
    source: str  # the cases file
    policy: str  # the policy file it tests
    policy_version: str | None = None
    passed: int = 0
    failed: int = 0
    cases: list[CaseResult] = Field(default_factory=list)


class _Case(BaseModel):
    name: str
    invocation: Invocation
    expect_outcome: str
    expect_winner: str | None = None
    expect_rules: list[str] | None = None
    expect_obligations: list[str] | None = None
    expect_waived: list[str] | None = None


def run_cases(path: Path) -> CaseReport:
    """Evaluate every case of the file at ``path`` against the policy it names."""
    source = str(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(source, f"TOML syntax error: {exc}") from None
    policy_name = document.get("policy")
    if not isinstance(policy_name, str) or not policy_name:
        raise PolicyError(source, 'required: the policy file to test (policy = "policy.toml")',
                          key="policy")
    raw_cases = document.get("cases", [])
    if not isinstance(raw_cases, list):
        raise PolicyError(source, "must be an array of tables ([[cases]])", key="cases")
    cases = [_case(entry, index, source) for index, entry in enumerate(raw_cases)]
    policy_path = (path.parent / policy_name) if not Path(policy_name).is_absolute() \
        else Path(policy_name)
    engine = PolicyEngine(load_policy(policy_path))
    results = [_run(engine, case) for case in cases]
    passed = sum(1 for r in results if r.passed)
    return CaseReport(
        source=source, policy=str(policy_path), policy_version=engine.version or None,
        passed=passed, failed=len(results) - passed, cases=results,
    )


def _case(entry: Any, index: int, source: str) -> _Case:
    label = f"case #{index + 1}"
    if not isinstance(entry, dict):
        raise PolicyError(source, "a case must be a table", key=label)
    if isinstance(entry.get("name"), str) and entry["name"]:
        label = f'case "{entry["name"]}"'
    unknown = [k for k in entry if k not in _CASE_KEYS]
    if unknown:
        raise PolicyError(source, f"unknown key (expected: {', '.join(_CASE_KEYS)})",
                          key=f"{label}: {unknown[0]}")
    if entry.get("expect_outcome") not in _OUTCOMES:
        raise PolicyError(source, f"must be one of {', '.join(_OUTCOMES)}",
                          key=f"{label}: expect_outcome")
    try:
        return _Case.model_validate(entry)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = "required" if first["type"] == "missing" else first["msg"]
        raise PolicyError(source, message, key=f"{label}: {where}") from None


def _run(engine: PolicyEngine, case: _Case) -> CaseResult:
    decision = engine.evaluate(case.invocation)
    obligations = [o.rule for o in decision.obligations]
    waived = [w.obligation_rule for w in decision.waived]
    problems: list[str] = []
    if decision.outcome != case.expect_outcome:
        problems.append(f"expected outcome {case.expect_outcome}, got {decision.outcome}"
                        f" (winner {_name(decision.winner)})")
    if case.expect_winner is not None:
        expected = case.expect_winner or None
        if decision.winner != expected:
            problems.append(f"expected winner {_name(expected)}, got {_name(decision.winner)}")
    for key, expected_ids, got in (
        ("rules matched", case.expect_rules, decision.rules),
        ("obligations", case.expect_obligations, obligations),
        ("waived obligations", case.expect_waived, waived),
    ):
        if expected_ids is not None and sorted(expected_ids) != sorted(got):
            problems.append(f"expected {key} {_ids(expected_ids)}, got {_ids(got)}")
    return CaseResult(
        name=case.name, passed=not problems, reason="; ".join(problems),
        outcome=decision.outcome, winner=decision.winner, rules=list(decision.rules),
        obligations=obligations, waived=waived, decision=decision,
    )


def _name(rule: str | None) -> str:
    return f'"{rule}"' if rule else "none (the policy default)"


def _ids(ids: list[str]) -> str:
    return "[" + ", ".join(sorted(ids)) + "]" if ids else "none"
