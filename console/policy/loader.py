"""The policy file: TOML parsed, validated and versioned by content.

Every error names the file, the rule (its id, or ``#N`` counting from 1 when it has none) and
the key: ``policy.toml: rule "refund-large": condition: Syntax error ... (line 1, column 4)``.

Format (TOML)::

    default = "permit"                        # permit | prohibit | require_approval
    meta = ["priority", "specificity", "modality"]
    [tool_classes]                            # class -> parent classes
    export = ["data_egress"]
    [tools]                                   # tool -> its classes
    export_report = ["export"]
    [data_classes]                            # class -> parent classes
    phi = ["sensitive"]
    [datasets.patients]
    classes = ["phi"]
    [datasets.weekly_report]
    derived_from = ["patients"]
    [[rules]]
    id = "phi-export"
    modality = "require_approval"
    action = ["export"]
    object = ["phi"]
    teams = ["billing"]                       # subject keys flat, or a [rules.subject] table
    condition = "args.rows > 100"
    deadline = "24h"                          # require_approval: unanswered past this ...
    default_decision = "reject"               # ... the gateway decides so, as this rule
    default_feedback = "nobody approved within 24h"
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from console.durations import parse_duration
from console.policy.classes import Hierarchy, Lineage
from console.policy.conditions import compile_condition
from console.policy.model import Policy, Rule, Subject

_TOP_LEVEL = ("default", "meta", "tool_classes", "tools", "data_classes", "datasets", "rules")
_SUBJECT_KEYS = tuple(Subject.model_fields)
_LIST_KEYS = ("action", "object", "waives", "decisions")
_GLOB_CHARS = frozenset("*?[")


class PolicyError(ValueError):
    """An invalid policy: ``str(err)`` is ``"<file>: rule "<id>": <key>: <what is wrong>"``."""

    def __init__(
        self, source: str, detail: str, *, rule: str | None = None, rule_index: int | None = None,
        key: str | None = None,
    ) -> None:
        self.source = source
        self.detail = detail
        self.rule = rule
        self.rule_index = rule_index
        self.key = key
        parts = [source or "<policy>"]
        if rule:
            parts.append(f'rule "{rule}"')
        elif rule_index is not None:
            parts.append(f"rule #{rule_index + 1}")
        if key:
            parts.append(key)
        parts.append(detail)
        super().__init__(": ".join(parts))


def policy_version(content: Policy | Mapping[str, Any]) -> str:
    """``"sha256:"`` + 16 hex of the canonical JSON of the policy's content (everything but
    ``version`` and ``source``, defaults filled in): reformatting or commenting the file keeps
    the version, changing any rule changes it."""
    if isinstance(content, Policy):
        data: Any = content.model_dump(mode="json", exclude={"version", "source"})
    else:
        data = {k: v for k, v in content.items() if k not in ("version", "source")}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_policy(path: Path) -> Policy:
    """Read, parse and validate the policy file at ``path`` (``PolicyError`` if invalid)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        detail = f"cannot read the policy file: {exc.strerror or exc}"
        raise PolicyError(str(path), detail) from None
    except UnicodeDecodeError as exc:
        raise PolicyError(str(path), f"not UTF-8 text: {exc.reason}") from None
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str) -> Policy:
    """Parse TOML ``text`` (``source`` names it in errors) into a validated, versioned Policy."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(source, f"TOML syntax error: {exc}") from None
    return policy_from_data(data, source)


def policy_from_data(data: Mapping[str, Any], source: str = "") -> Policy:
    """Build a validated, versioned Policy from parsed file content (a TOML/JSON document)."""
    unknown = [k for k in data if k not in _TOP_LEVEL]
    if unknown:
        raise PolicyError(
            source, f"unknown top-level key (expected one of: {', '.join(_TOP_LEVEL)})",
            key=unknown[0],
        )
    raw_rules = data.get("rules", [])
    if not isinstance(raw_rules, list):
        raise PolicyError(source, "must be an array of tables ([[rules]])", key="rules")
    rules = [_rule(entry, index, source) for index, entry in enumerate(raw_rules)]
    top = {k: v for k, v in data.items() if k != "rules"}
    try:
        policy = Policy.model_validate({**top, "version": "", "source": source})
    except ValidationError as exc:
        raise _from_validation(exc, source) from None
    policy.rules = rules
    validate_policy(policy)
    policy.version = policy_version(policy)
    return policy


def _rule(entry: Any, index: int, source: str) -> Rule:
    if not isinstance(entry, dict):
        raise PolicyError(source, "a rule must be a table", rule_index=index)
    rule_id = entry.get("id") if isinstance(entry.get("id"), str) and entry.get("id") else None
    body = dict(entry)
    subject = body.pop("subject", {})
    if not isinstance(subject, dict):
        raise PolicyError(source, "must be a table ([rules.subject])", rule=rule_id,
                          rule_index=index, key="subject")
    subject = dict(subject)
    for key in _SUBJECT_KEYS:
        if key in body:
            if key in subject:
                raise PolicyError(source, "given both flat and in [rules.subject]", rule=rule_id,
                                  rule_index=index, key=key)
            subject[key] = body.pop(key)
    for key in _SUBJECT_KEYS:
        if isinstance(subject.get(key), str):
            subject[key] = [subject[key]]
    for key in _LIST_KEYS:
        if isinstance(body.get(key), str):
            body[key] = [body[key]]
    body["subject"] = subject
    try:
        return Rule.model_validate(body)
    except ValidationError as exc:
        raise _from_validation(exc, source, rule=rule_id, rule_index=index) from None


def _from_validation(
    exc: ValidationError, source: str, *, rule: str | None = None, rule_index: int | None = None
) -> PolicyError:
    first = exc.errors()[0]
    loc = [str(part) for part in first["loc"]]
    if loc[:1] == ["subject"] and len(loc) > 1 and first["type"] != "extra_forbidden":
        loc = loc[1:]  # subject keys are usually written flat in the file
    message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    if first["type"] == "missing":
        message = "required"
    return PolicyError(source, message, rule=rule, rule_index=rule_index,
                       key=".".join(loc) or None)


def validate_policy(policy: Policy) -> None:
    """The checks a policy must pass beyond its types (also for a Policy built in code or
    received over the agent channel): ``PolicyError`` on the first problem."""
    source = policy.source
    if sorted(policy.meta) != ["modality", "priority", "specificity"]:
        raise PolicyError(source, "must list priority, specificity and modality once each, in "
                          "the order they apply", key="meta")
    try:
        tool_classes = Hierarchy(policy.tool_classes)
    except ValueError as exc:
        raise PolicyError(source, str(exc), key="tool_classes") from None
    try:
        data_classes = Hierarchy(policy.data_classes)
    except ValueError as exc:
        raise PolicyError(source, str(exc), key="data_classes") from None
    for tool, classes in policy.tools.items():
        for cls in classes:
            if cls not in tool_classes:
                raise PolicyError(source, f"unknown tool class {cls!r} (declare it under "
                                  "[tool_classes])", key=f"tools.{tool}")
    for name, dataset in policy.datasets.items():
        for cls in dataset.classes:
            if cls not in data_classes:
                raise PolicyError(source, f"unknown data class {cls!r} (declare it under "
                                  "[data_classes])", key=f"datasets.{name}.classes")
        for upstream in dataset.derived_from:
            if upstream not in policy.datasets:
                raise PolicyError(source, f"unknown dataset {upstream!r}",
                                  key=f"datasets.{name}.derived_from")
    try:
        lineage = Lineage(policy.datasets)
    except ValueError as exc:
        raise PolicyError(source, str(exc), key="datasets") from None
    _validate_rules(policy, data_classes, lineage)


def _validate_rules(policy: Policy, data_classes: Hierarchy, lineage: Lineage) -> None:
    source = policy.source
    seen: dict[str, int] = {}
    kinds = {rule.id: rule.modality for rule in policy.rules}
    for index, rule in enumerate(policy.rules):

        def fail(key: str, detail: str, index: int = index, rule: Rule = rule) -> PolicyError:
            return PolicyError(source, detail, rule=rule.id or None, rule_index=index, key=key)

        if not rule.id.strip():
            raise fail("id", "must not be empty")
        if rule.id in seen:
            raise fail("id", f"duplicate id (rule #{seen[rule.id] + 1} has it too)")
        seen[rule.id] = index
        if rule.condition.strip():
            try:
                compile_condition(rule.condition)
            except ValueError as exc:
                raise fail("condition", str(exc)) from None
        if rule.on == "tool":
            for name in rule.object:
                if _GLOB_CHARS & set(name):
                    continue
                if name not in data_classes and name not in lineage:
                    raise fail("object", f"unknown data class or dataset {name!r}")
        if rule.approvers < 1:
            raise fail("approvers", "must be at least 1")
        if rule.modality == "require_approval" and not rule.decisions:
            raise fail("decisions", "a require_approval rule must allow at least one decision")
        if rule.modality == "oblige" and not rule.what.strip():
            raise fail("what", "an oblige rule must say what is owed (what = \"...\")")
        if rule.within_s is not None and rule.within_s < 0:
            raise fail("within_s", "must not be negative")
        _validate_deadline(rule, fail)
        if rule.waives and rule.modality != "dispense":
            raise fail("waives", "only a dispense rule waives obligations")
        if rule.modality == "dispense" and not rule.waives:
            raise fail("waives", "a dispense rule must name the oblige rules it waives")
        for waived in rule.waives:
            if waived not in kinds:
                raise fail("waives", f"no rule {waived!r}")
            if kinds[waived] != "oblige":
                raise fail("waives", f"rule {waived!r} is a {kinds[waived]} rule, not oblige")


def _validate_deadline(rule: Rule, fail: Callable[[str, str], PolicyError]) -> None:
    """A deadline parses as a duration; a default decision belongs to a require_approval rule
    with a deadline and is one of the decisions the rule allows."""
    if rule.deadline:
        if rule.modality != "require_approval":
            raise fail("deadline", "only a require_approval rule has a deadline")
        try:
            parse_duration(rule.deadline)
        except ValueError as exc:
            raise fail("deadline", str(exc)) from None
    if rule.default_decision is None:
        if rule.default_feedback:
            raise fail("default_feedback", "default_feedback goes with default_decision")
        return
    if not rule.deadline:
        raise fail("default_decision", "a default decision needs a deadline (deadline = \"24h\")")
    if rule.default_decision not in rule.decisions:
        raise fail("default_decision",
                   f"{rule.default_decision!r} is not among the rule's decisions "
                   f"({', '.join(rule.decisions)})")
    if rule.approvers > 1 and rule.default_decision == "approve":
        raise fail("default_decision", "a four-eyes rule (approvers >= 2) cannot approve by "
                   "default: that would be fewer eyes, not more")


def rule_deadline_s(rule: Rule) -> float | None:
    """The rule's deadline in seconds (None: the rule has none). Validated at load."""
    return parse_duration(rule.deadline).total_seconds() if rule.deadline else None
