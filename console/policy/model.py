"""Policy types: rules, classes, datasets, the invocation checked and the decision made.

Names here are a scripting contract (docs/json-contract.md): ``PolicyDecision`` is what
``irq policy check -o json`` prints and ``Obligation`` what ``irq obligations -o json`` lists.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Modality = Literal["permit", "prohibit", "require_approval", "oblige", "dispense"]
PolicyOutcome = Literal["permit", "prohibit", "require_approval"]
RuleOn = Literal["tool", "command"]
DecisionName = Literal["approve", "edit", "reject", "respond"]
MetaStep = Literal["priority", "specificity", "modality"]
ObligationState = Literal["open", "fulfilled", "overdue", "waived"]

_DEFAULT_DECISIONS: list[DecisionName] = ["approve", "edit", "reject"]
_DEFAULT_META: list[MetaStep] = ["priority", "specificity", "modality"]


class Subject(BaseModel):
    """Who a rule is about; every non-empty list must match (fnmatch globs), empty means any."""

    model_config = ConfigDict(extra="forbid")

    agents: list[str] = Field(default_factory=list)
    teams: list[str] = Field(default_factory=list)
    backends: list[str] = Field(default_factory=list)
    contexts: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)  # command rules: viewer | operator | admin
    identities: list[str] = Field(default_factory=list)  # command rules: token identities


class Rule(BaseModel):
    """One deontic rule."""

    model_config = ConfigDict(extra="forbid")

    id: str
    on: RuleOn = "tool"
    modality: Modality
    subject: Subject = Field(default_factory=Subject)
    action: list[str] = Field(default_factory=list)  # tool names or classes; commands: verbs
    object: list[str] = Field(default_factory=list)  # data classes or datasets; resource kinds
    condition: str = ""  # CEL, evaluates to a bool; "" is true
    priority: int = 0
    description: str = ""
    sensitive: bool = False  # the tools it names fail closed when an agent has no policy
    # require_approval
    decisions: list[DecisionName] = Field(default_factory=lambda: _DEFAULT_DECISIONS.copy())
    decide_role: Literal["operator", "admin"] = "operator"
    approvers: int = 1
    # require_approval: past ``deadline`` (a duration, "24h") the gateway applies
    # ``default_decision`` (approve | reject) in the rule's name; without one the
    # interrupt only becomes overdue
    deadline: str = ""
    default_decision: Literal["approve", "reject"] | None = None
    default_feedback: str = ""  # reject: the text that goes back to the agent
    # oblige
    what: str = ""
    within_s: float | None = None
    # dispense
    waives: list[str] = Field(default_factory=list)


class Dataset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    classes: list[str] = Field(default_factory=list)
    derived_from: list[str] = Field(default_factory=list)


class Policy(BaseModel):
    version: str
    source: str = ""
    default: PolicyOutcome = "permit"
    meta: list[MetaStep] = Field(default_factory=lambda: _DEFAULT_META.copy())
    tool_classes: dict[str, list[str]] = Field(default_factory=dict)
    tools: dict[str, list[str]] = Field(default_factory=dict)
    data_classes: dict[str, list[str]] = Field(default_factory=dict)
    datasets: dict[str, Dataset] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)


class Invocation(BaseModel):
    """What is being checked: an agent's tool call, or an operator's command."""

    on: RuleOn = "tool"
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    agent: str = ""
    team: str = ""
    backend: str = ""
    context: str = ""
    run_id: str = ""
    data: list[str] = Field(default_factory=list)
    identity: str = ""
    role: str = ""
    reason: str = ""
    resources: list[dict[str, Any]] = Field(default_factory=list)
    interrupt: dict[str, Any] = Field(default_factory=dict)
    at: datetime | None = None


class ObligationSpec(BaseModel):
    rule: str
    what: str
    within_s: float | None = None


class Waiver(BaseModel):
    obligation_rule: str
    by: str  # the dispense rule


class MatchedRule(BaseModel):
    id: str
    modality: Modality
    priority: int
    specificity: int
    why: str


class Approval(BaseModel):
    rule: str
    decisions: list[str]
    decide_role: str
    approvers: int
    description: str = ""
    deadline_s: float | None = None
    default_decision: Literal["approve", "reject"] | None = None
    default_feedback: str = ""


class PolicyDecision(BaseModel):
    outcome: PolicyOutcome
    rules: list[str] = Field(default_factory=list)
    winner: str | None = None
    obligations: list[ObligationSpec] = Field(default_factory=list)
    waived: list[Waiver] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list)
    explanation: list[str] = Field(default_factory=list)
    policy_version: str | None = None
    matched: list[MatchedRule] = Field(default_factory=list)
    approval: Approval | None = None


class Obligation(BaseModel):
    id: str  # "{run_id}#{call_id}/{rule}": a replayed call sends the same id
    rule: str
    run_id: str
    what: str
    created_at: datetime
    due_at: datetime | None = None
    state: ObligationState = "open"
    by: str = ""  # who fulfilled it, or the dispense rule that waived it
    note: str = ""
    tool: str = ""
    policy_version: str | None = None
