"""The policy engine: which rules match an invocation, who wins, what is owed, and why.

``PolicyEngine(policy)`` compiles every CEL condition once and indexes the rules by action
(an exact tool name, a tool class, a command verb; plus a bucket for rules with no action and
one for glob actions), so a call only looks at its candidate rules; the candidate list of a
tool is computed once. ``evaluate`` builds one CEL activation per call, lazily: a variable is
converted for CEL only when a candidate's condition that reads it is reached (after its
subject/action/object test).

Meta-policy (``policy.meta``, default ``priority, specificity, modality``): among the matched
permit / prohibit / require_approval rules the winner has the highest priority; ties go to the
more specific rule; ties go to prohibit > require_approval > permit; remaining ties to the
rule written first. No such rule: ``policy.default``. Obligations accumulate from every
matched oblige rule (none when the outcome is prohibit); a matched dispense rule cancels
exactly the obligations it names.

Specificity (a sum; shown in every explanation):
  action: exact tool name or command verb 1000, glob 500, tool class 100 + its depth
  (a root class is 1, capped at 399); object: a dataset the call names 1000, a dataset
  upstream of it 900, a resource kind 1000, glob 500, data class 100 + its depth (capped);
  each subject constraint 10; a condition 10.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from console.policy import cel_core as cel
from console.policy.classes import DataFacts, Taxonomy
from console.policy.conditions import VARIABLES, compile_condition
from console.policy.loader import PolicyError, rule_deadline_s
from console.policy.model import (
    Approval,
    Invocation,
    MatchedRule,
    Modality,
    ObligationSpec,
    Policy,
    PolicyDecision,
    PolicyOutcome,
    Rule,
    Waiver,
)

DECIDING: frozenset[Modality] = frozenset({"permit", "prohibit", "require_approval"})
MODALITY_RANK: dict[str, int] = {"permit": 1, "require_approval": 2, "prohibit": 3}
EXACT = 1000
UPSTREAM_DATASET = 900
GLOB = 500
CLASS_BASE = 100
CLASS_DEPTH_CAP = 399
PER_SUBJECT = 10
CONDITION = 10

_GLOB_CHARS = frozenset("*?[")
VARIABLE_NAMES = frozenset(VARIABLES)
_SUBJECT_FIELDS: tuple[tuple[str, str, str], ...] = (
    # (Subject field, Invocation field, word used in explanations)
    ("agents", "agent", "agent"),
    ("teams", "team", "team"),
    ("backends", "backend", "backend"),
    ("contexts", "context", "context"),
    ("roles", "role", "role"),
    ("identities", "identity", "identity"),
)
_CANDIDATE_CACHE_MAX = 4096


def _is_glob(pattern: str) -> bool:
    return bool(_GLOB_CHARS & set(pattern))


class _Patterns:
    """A list of fnmatch patterns: exact names answered by a set lookup, globs by one regex."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.exact = frozenset(p for p in patterns if not _is_glob(p))
        self.globs = tuple(p for p in patterns if _is_glob(p))
        self._regex = (
            re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in self.globs))
            if self.globs else None
        )

    def match(self, value: str) -> str | None:
        """The pattern ``value`` matches (itself when exact), or None."""
        if value in self.exact:
            return value
        if self._regex is not None and self._regex.match(value):
            return next(g for g in self.globs if fnmatch.fnmatchcase(value, g))
        return None


@dataclass(frozen=True)
class _Compiled:
    index: int
    rule: Rule
    program: cel.Program | None
    reads: frozenset[str]  # the variables its condition reads
    subject: tuple[tuple[str, str, _Patterns], ...]  # (invocation field, word, patterns)
    action: _Patterns
    objects: _Patterns
    base_specificity: int  # subject constraints + condition


@dataclass(frozen=True)
class _Candidate:
    compiled: _Compiled
    action_score: int
    action_why: str


@dataclass(slots=True)
class _Hit:
    rule: Rule
    specificity: int
    why: str
    key: tuple[int, ...]  # the meta-policy's sort key, in policy.meta order


class PolicyEngine:
    """Evaluates invocations against one immutable policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.version = policy.version
        try:
            self.taxonomy = Taxonomy(policy)
        except ValueError as exc:
            raise PolicyError(policy.source, str(exc)) from None
        self._rules: list[_Compiled] = [self._compile(i, r) for i, r in enumerate(policy.rules)]
        # on -> action key -> rule indices; "" holds the rules with no action
        self._by_action: dict[str, dict[str, list[int]]] = {"tool": {}, "command": {}}
        # glob actions by their literal prefix ("refund_*" under "refund_"), so a name is
        # tested only against the globs whose prefix it starts with
        self._glob_rules: dict[str, dict[str, list[tuple[re.Pattern[str], int]]]] = {
            "tool": {}, "command": {}}
        for compiled in self._rules:
            rule = compiled.rule
            bucket = self._by_action[rule.on]
            if not rule.action:
                bucket.setdefault("", []).append(compiled.index)
            for name in compiled.action.exact:
                bucket.setdefault(name, []).append(compiled.index)
            for glob in compiled.action.globs:
                prefix = re.split(r"[*?\[]", glob, maxsplit=1)[0]
                regex = re.compile(fnmatch.translate(glob))
                self._glob_rules[rule.on].setdefault(prefix, []).append((regex, compiled.index))
        self._candidates: dict[tuple[str, str], tuple[_Candidate, ...]] = {}
        self._sensitive = self._sensitive_tools()
        self._meta_key = self._meta_key_function()

    # ----------------------------------------------------------------------------- building

    def _compile(self, index: int, rule: Rule) -> _Compiled:
        program = None
        if rule.condition.strip():
            try:
                program = compile_condition(rule.condition)
            except ValueError as exc:
                raise PolicyError(self.policy.source, str(exc), rule=rule.id, rule_index=index,
                                  key="condition") from None
        subject = tuple(
            (inv_field, word, _Patterns(getattr(rule.subject, field)))
            for field, inv_field, word in _SUBJECT_FIELDS
            if getattr(rule.subject, field)
        )
        base = PER_SUBJECT * len(subject) + (CONDITION if program is not None else 0)
        reads = frozenset(program.variables()) & VARIABLE_NAMES if program else frozenset()
        return _Compiled(index, rule, program, reads, subject, _Patterns(rule.action),
                         _Patterns(rule.object), base)

    def _sensitive_tools(self) -> set[str]:
        tools = self.taxonomy.tools()
        rules = [r for r in self.policy.rules if r.sensitive and r.on == "tool"]
        if not rules:
            return set()
        members: dict[str, set[str]] = {}  # tool class -> the declared tools in it
        for tool in tools:
            for cls in self.taxonomy.classes_of_tool(tool):
                members.setdefault(cls, set()).add(tool)
        out: set[str] = set()
        for rule in rules:
            if not rule.action:
                out.update(tools)
                continue
            patterns = _Patterns(rule.action)
            for name in patterns.exact:
                if name in self.taxonomy.tool_classes:
                    out |= members.get(name, set())
                else:
                    out.add(name)
            if patterns.globs:
                out.update(t for t in tools if patterns.match(t) is not None)
                for cls, inside in members.items():
                    if patterns.match(cls) is not None:
                        out |= inside
        return out

    def _meta_key_function(self) -> Callable[[Rule, int], tuple[int, ...]]:
        steps = tuple(self.policy.meta)
        if steps == ("priority", "specificity", "modality"):  # the default, spelled out
            return lambda rule, specificity: (
                rule.priority, specificity, MODALITY_RANK.get(rule.modality, 0))

        def key(rule: Rule, specificity: int) -> tuple[int, ...]:
            values = {
                "priority": rule.priority,
                "specificity": specificity,
                "modality": MODALITY_RANK.get(rule.modality, 0),
            }
            return tuple(values[s] for s in steps)

        return key

    # ------------------------------------------------------------------------------ queries

    def sensitive_tools(self) -> set[str]:
        """Tool names a ``sensitive = true`` rule names (directly or by class): these fail
        closed at an agent that has no policy."""
        return set(self._sensitive)

    def is_sensitive(self, tool: str) -> bool:
        """Whether ``tool`` fails closed without a policy (also a tool not declared under
        [tools] that a sensitive glob or action-less rule covers)."""
        if tool in self._sensitive:
            return True
        # a tool the policy does not declare has no classes: a glob or an empty action only
        return any(
            c.rule.sensitive and c.rule.on == "tool" and (
                not c.rule.action or (c.action.globs and c.action.match(tool) is not None)
            )
            for c in self._rules
        )

    def candidates(self, on: str, tool: str) -> tuple[_Candidate, ...]:
        """The rules whose action can match ``tool`` (memoized per tool)."""
        key = (on, tool)
        cached = self._candidates.get(key)
        if cached is not None:
            return cached
        bucket = self._by_action.get(on, {})
        classes = self.taxonomy.classes_of_tool(tool) if on == "tool" else frozenset()
        indices: set[int] = set(bucket.get("", ()))
        indices.update(bucket.get(tool, ()))
        for cls in classes:
            indices.update(bucket.get(cls, ()))
        globs = self._glob_rules.get(on, {})
        if globs:
            for name in (tool, *classes):
                for end in range(len(name) + 1):
                    for regex, index in globs.get(name[:end], ()):
                        if index not in indices and regex.match(name):
                            indices.add(index)
        out = []
        for index in sorted(indices):
            compiled = self._rules[index]
            score, why = self._action_score(compiled, tool, classes)
            out.append(_Candidate(compiled, score, why))
        if len(self._candidates) >= _CANDIDATE_CACHE_MAX:
            self._candidates.clear()
        result = tuple(out)
        self._candidates[key] = result
        return result

    def _action_score(
        self, compiled: _Compiled, tool: str, classes: frozenset[str]
    ) -> tuple[int, str]:
        if not compiled.rule.action:
            return 0, ""
        if tool in compiled.action.exact:
            return EXACT, f"action {tool}"
        best: tuple[int, str] = (-1, "")
        pattern = compiled.action.match(tool)
        if pattern is not None:
            best = (GLOB, f"action {tool} matches {pattern}")
        hierarchy = self.taxonomy.tool_classes
        for cls in classes:
            if cls in compiled.action.exact:
                score = CLASS_BASE + min(hierarchy.depth(cls), CLASS_DEPTH_CAP)
                if score > best[0]:
                    best = (score, f"{tool} is in tool class {cls}")
            elif best[0] < GLOB and compiled.action.match(cls) is not None:
                best = (GLOB, f"{tool} is in tool class {cls}")
        return best

    # --------------------------------------------------------------------------- evaluation

    def evaluate(self, inv: Invocation) -> PolicyDecision:
        """Decide ``inv``: outcome, every matched rule, the winner, obligations, waivers and
        an explanation that names them all."""
        candidates = self.candidates(inv.on, inv.tool)
        facts = self.taxonomy.expand_data(inv.data) if inv.on == "tool" else None
        kinds = (
            tuple(str(r.get("kind", "")) for r in inv.resources if isinstance(r, dict))
            if inv.on == "command" else ()
        )
        activation: _Activation | None = None
        hits: list[_Hit] = []
        failures: list[str] = []
        meta_key = self._meta_key
        for cand in candidates:
            compiled = cand.compiled
            subject_why = ""
            if compiled.subject:
                found = self._subject(compiled, inv)
                if found is None:
                    continue
                subject_why = found
            obj_score, obj_why = 0, ""
            if compiled.rule.object:
                objects = compiled.objects
                if (facts is not None and not objects.globs
                        and objects.exact.isdisjoint(facts.names)):
                    continue  # the common miss, answered by one set operation
                obj = self._object(compiled, facts, kinds)
                if obj is None:
                    continue
                obj_score, obj_why = obj
            condition_why = ""
            if compiled.program is not None:
                if activation is None:
                    activation = _Activation(inv, facts)
                try:
                    context = activation.context_for(compiled.reads)
                except ValueError as exc:
                    failures.append(
                        f'rule "{compiled.rule.id}" did not match: the call could not be given '
                        f"to its condition ({exc})"
                    )
                    continue
                try:
                    result = compiled.program.execute(context)
                except Exception as exc:  # a missing key, a type error: not matched, said so
                    failures.append(
                        f'rule "{compiled.rule.id}" did not match: its condition failed at run '
                        f"time ({type(exc).__name__}: {_one_line(exc)})"
                    )
                    continue
                if result is not True:
                    if not isinstance(result, bool):
                        failures.append(
                            f'rule "{compiled.rule.id}" did not match: its condition returned '
                            f"{result!r}, not a bool"
                        )
                    continue
                condition_why = f"condition {compiled.rule.condition} is true"
            why = "; ".join(w for w in (cand.action_why, obj_why, subject_why, condition_why) if w)
            specificity = cand.action_score + obj_score + compiled.base_specificity
            rule = compiled.rule
            hits.append(_Hit(rule, specificity, why or "applies to every call",
                             meta_key(rule, specificity)))
        return self._decide(inv, hits, failures)

    @staticmethod
    def _subject(compiled: _Compiled, inv: Invocation) -> str | None:
        for inv_field, _word, patterns in compiled.subject:  # reject first, cheaply
            if not patterns.globs and getattr(inv, inv_field) not in patterns.exact:
                return None
        parts: list[str] = []
        for inv_field, word, patterns in compiled.subject:
            value = getattr(inv, inv_field)
            pattern = patterns.match(value)
            if pattern is None:
                return None
            parts.append(f"{word} {value}" + (f" matches {pattern}" if pattern != value else ""))
        return ", ".join(parts)

    def _object(
        self, compiled: _Compiled, facts: DataFacts | None, kinds: tuple[str, ...]
    ) -> tuple[int, str] | None:
        objects = compiled.objects
        if not compiled.rule.object:
            return 0, ""
        if facts is None:  # a command rule: resource kinds of the target run
            for kind in kinds:
                pattern = objects.match(kind)
                if pattern is not None:
                    return (EXACT if pattern == kind else GLOB), f"the run holds a {kind} resource"
            return None
        best: tuple[int, str] | None = None
        for name in objects.exact:
            if name in facts.direct:
                return EXACT, f"the call touches dataset {name}"
            if name in facts.datasets:
                best = _better(best, (UPSTREAM_DATASET, f"the call's data is derived from "
                                                        f"dataset {name}"))
            elif name in facts.classes:
                depth = self.taxonomy.data_classes.depth(name)
                score = CLASS_BASE + min(depth, CLASS_DEPTH_CAP)
                if best is None or score > best[0]:
                    best = (score, f"the call's data is {name}{self._provenance(name, facts)}")
        if objects.globs and (best is None or best[0] < GLOB):
            for value in facts.sorted_datasets + facts.sorted_classes:
                pattern = objects.match(value)
                if pattern is not None:
                    best = _better(best, (GLOB, f"the call's data {value} matches {pattern}"))
                    break
        return best

    def _provenance(self, cls: str, facts: DataFacts) -> str:
        """" (dataset weekly, derived from patients: phi)": where a data class came from."""
        tax = self.taxonomy
        for dataset in sorted(facts.direct):
            upstream = sorted(tax.lineage.upstream(dataset) - {dataset})
            for source in [dataset, *upstream]:
                for own in tax.lineage.declared(source):
                    if cls not in tax.data_classes.ancestors(own):
                        continue
                    what = own if own == cls else f"{own}, a kind of {cls}"
                    if source == dataset:
                        return f" (dataset {dataset} is {what})"
                    return f" (dataset {dataset} is derived from {source}, which is {what})"
        return ""

    def _decide(self, inv: Invocation, hits: list[_Hit], failures: list[str]) -> PolicyDecision:
        deciding = [h for h in hits if h.rule.modality in DECIDING]
        explanation: list[str] = []
        version = self.version or "unversioned"
        if hits:
            explanation.append(
                f"policy {version}: {len(hits)} rule{'s' if len(hits) != 1 else ''} matched "
                f"{inv.tool}"
            )
        else:
            explanation.append(f"policy {version}: no rule matched {inv.tool}")
        for hit in hits:
            rule = hit.rule
            line = (f'matched {rule.modality} "{rule.id}" (priority {rule.priority}, '
                    f"specificity {hit.specificity}): {hit.why}")
            if rule.description:
                line += f" — {rule.description}"
            explanation.append(line)
        explanation.extend(failures)

        conflicts: list[str] = []
        winner: _Hit | None = None
        outcome: PolicyOutcome
        if deciding:
            winner = max(deciding, key=_hit_key)  # max keeps the first of equals
            outcome = winner.rule.modality  # type: ignore[assignment]
            for other in deciding:
                if other is winner or other.rule.modality == winner.rule.modality:
                    continue
                conflicts.append(
                    f'{winner.rule.modality} "{winner.rule.id}" overrides {other.rule.modality} '
                    f'"{other.rule.id}": {self._why_over(winner, other)}'
                )
            explanation.extend(f"conflict: {c}" for c in conflicts)
            explanation.append(
                f'outcome {outcome}, decided by {winner.rule.modality} "{winner.rule.id}": '
                + self._why_won(winner, deciding)
            )
        else:
            outcome = self.policy.default
            explanation.append(
                f"outcome {outcome}: no permit, prohibit or require_approval rule matched, so "
                f"the policy default applies"
            )

        obligations: list[ObligationSpec] = []
        waived: list[Waiver] = []
        oblige = [h.rule for h in hits if h.rule.modality == "oblige"]
        dispense = [h.rule for h in hits if h.rule.modality == "dispense"]
        if oblige and outcome == "prohibit":
            names = ", ".join(f'"{r.id}"' for r in oblige)
            explanation.append(f"no obligation opened ({names}): the call is prohibited")
        elif oblige:
            for rule in oblige:
                by = next((d for d in dispense if rule.id in d.waives), None)
                if by is not None:
                    waived.append(Waiver(obligation_rule=rule.id, by=by.id))
                    explanation.append(
                        f'obligation "{rule.id}" ({rule.what}) waived by dispensation '
                        f'"{by.id}"' + (f" — {by.description}" if by.description else "")
                    )
                else:
                    obligations.append(
                        ObligationSpec(rule=rule.id, what=rule.what, within_s=rule.within_s)
                    )
                    deadline = (f" within {_seconds(rule.within_s)}"
                                if rule.within_s is not None else "")
                    explanation.append(f'obligation "{rule.id}": {rule.what}{deadline}')

        approval = None
        if winner is not None and winner.rule.modality == "require_approval":
            rule = winner.rule
            approval = _approval(rule)
            who = f"{rule.approvers} different approvers" if rule.approvers > 1 else "one approver"
            explanation.append(
                f"approval: {who} with role {rule.decide_role} or above may "
                f"{', '.join(rule.decisions)}"
                + (f"; unanswered after {rule.deadline}: {rule.default_decision} by default"
                   if rule.default_decision else "")
            )
        return PolicyDecision(
            outcome=outcome,
            rules=[h.rule.id for h in hits],
            winner=winner.rule.id if winner is not None else None,
            obligations=obligations,
            waived=waived,
            conflicts=conflicts,
            explanation=explanation,
            policy_version=self.version or None,
            matched=[
                MatchedRule(id=h.rule.id, modality=h.rule.modality, priority=h.rule.priority,
                            specificity=h.specificity, why=h.why)
                for h in hits
            ],
            approval=approval,
        )

    def _why_over(self, winner: _Hit, other: _Hit) -> str:
        steps = self.policy.meta
        for position, (step, mine, theirs) in enumerate(zip(steps, winner.key, other.key,
                                                            strict=True)):
            if mine == theirs:
                continue
            if step == "modality":
                equal = " and ".join(steps[:position])
                return (f"equal {equal}, and " if equal else "") + (
                    f"{winner.rule.modality} beats {other.rule.modality}")
            return f"higher {step} ({mine} > {theirs})"
        return "equal on every step; the rule written first wins"

    def _why_won(self, winner: _Hit, deciding: list[_Hit]) -> str:
        rest = [h for h in deciding if h is not winner]
        if not rest:
            return "the only permit, prohibit or require_approval rule that matched"
        runner_up = max(rest, key=_hit_key)
        return f'{self._why_over(winner, runner_up)}, over the runner-up "{runner_up.rule.id}"'


def _hit_key(hit: _Hit) -> tuple[int, ...]:
    return hit.key


def _better(
    current: tuple[int, str] | None, candidate: tuple[int, str]
) -> tuple[int, str]:
    return candidate if current is None or candidate[0] > current[0] else current


class _Activation:
    """The CEL variables of one call, handed to CEL lazily: a variable is converted the first
    time a condition that reads it runs, once per call. A prebuilt ``cel.Context`` is far
    cheaper per condition than a dict converted on every ``execute``, and converting a value
    is the expensive part (strings cost microseconds each), so a call whose conditions never
    read ``data`` never converts its expanded data classes."""

    def __init__(self, inv: Invocation, facts: DataFacts | None) -> None:
        self.inv = inv
        self.facts = facts
        self.context = cel.Context()
        self.added: set[str] = set()
        self.failed: dict[str, str] = {}

    def context_for(self, names: frozenset[str]) -> cel.Context:
        """The context with ``names`` set; ``ValueError`` if one cannot be given to CEL."""
        for name in names:
            if name in self.added:
                continue
            if name in self.failed:
                raise ValueError(self.failed[name])
            value = self._value(name)
            try:
                self.context.add_variable(name, value)
            except Exception:
                try:  # values CEL cannot take (sets, objects): as their JSON text
                    self.context.add_variable(name, json.loads(json.dumps(value, default=str)))
                except Exception as exc:
                    self.failed[name] = f"{name}: {type(exc).__name__}: {_one_line(exc)}"
                    raise ValueError(self.failed[name]) from None
            self.added.add(name)
        return self.context

    def _value(self, name: str) -> Any:
        inv, facts = self.inv, self.facts
        if name == "tool":
            return inv.tool
        if name == "args":
            return inv.args
        if name == "agent":
            return {"name": inv.agent, "team": inv.team}
        if name == "run":
            return {"id": inv.run_id, "backend": inv.backend, "context": inv.context}
        if name == "data":
            return list(facts.sorted_classes) if facts is not None else list(inv.data)
        if name == "datasets":
            return list(facts.sorted_datasets) if facts is not None else []
        if name == "cmd":
            return {"action": inv.tool if inv.on == "command" else "", "identity": inv.identity,
                    "role": inv.role, "reason": inv.reason}
        if name == "resources":
            return inv.resources
        if name == "interrupt":
            return inv.interrupt
        if name == "now":
            at = inv.at or datetime.now(UTC)
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        raise ValueError(f"unknown variable {name!r}")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def _seconds(value: float) -> str:
    return f"{int(value)} s" if float(value).is_integer() else f"{value} s"


def _approval(rule: Rule) -> Approval:
    """What a winning require_approval rule asks of the human (and decides past its deadline)."""
    return Approval(rule=rule.id, decisions=list(rule.decisions), decide_role=rule.decide_role,
                    approvers=rule.approvers, description=rule.description,
                    deadline_s=rule_deadline_s(rule), default_decision=rule.default_decision,
                    default_feedback=rule.default_feedback)
