"""Properties of the engine (hypothesis): conflict resolution, dispensations, lineage."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from console.policy.classes import Lineage
from console.policy.engine import MODALITY_RANK, PolicyEngine
from console.policy.loader import policy_from_data
from console.policy.model import Dataset, Invocation, PolicyDecision

FAST = settings(max_examples=100, deadline=None)

# a small world: tool classes root > mid > leaf, data classes data > sensitive > phi,
# datasets patients (phi) <- cohort <- summary, and web (data)
WORLD: dict[str, Any] = {
    "tool_classes": {"root": [], "mid": ["root"], "leaf": ["mid"]},
    "tools": {"t1": ["leaf"], "t2": ["mid"], "t3": []},
    "data_classes": {"data": [], "sensitive": ["data"], "phi": ["sensitive"]},
    "datasets": {
        "patients": {"classes": ["phi"]},
        "cohort": {"derived_from": ["patients"]},
        "summary": {"derived_from": ["cohort"]},
        "web": {"classes": ["data"]},
    },
}
TOOLS = ["t1", "t2", "t3"]
ACTIONS: list[list[str]] = [[], ["root"], ["mid"], ["leaf"], ["t1"], ["t2"], ["t3"], ["t*"]]
OBJECTS: list[list[str]] = [[], ["data"], ["sensitive"], ["phi"], ["patients"], ["summary"],
                            ["web"]]
CONDITIONS = ["", "args.n > 5", "args.n <= 5", "args.missing > 1", "agent.team == \"a\""]
DECIDING = ["permit", "prohibit", "require_approval"]


def build(rules: list[dict[str, Any]], **extra: Any) -> PolicyEngine:
    return PolicyEngine(policy_from_data({**WORLD, **extra, "rules": rules}, "prop.toml"))


def rule_strategy(modality: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "modality": modality,
        "action": st.sampled_from(ACTIONS),
        "object": st.sampled_from(OBJECTS),
        "teams": st.sampled_from([[], ["a"], ["b"], ["a", "b"]]),
        "condition": st.sampled_from(CONDITIONS),
        "priority": st.integers(0, 3),
    })


invocations = st.builds(
    lambda tool, data, team, n: Invocation(tool=tool, data=data, team=team, args={"n": n}),
    st.sampled_from(TOOLS),
    st.lists(st.sampled_from(["patients", "cohort", "summary", "web", "phi", "data"]),
             max_size=2, unique=True),
    st.sampled_from(["a", "b", "c"]),
    st.integers(0, 10),
)


def with_ids(rules: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", **r} for i, r in enumerate(rules)]


# ------------------------------------------------------------------ the reference reading
# A brute-force reading of the meta-policy over WORLD, written from DESIGN.md §1 and the
# engine's documented scores, without the engine's index, taxonomy or CEL: what a rule
# matches, its specificity, who wins, what is owed. The engine must agree with it.

RANK = {"permit": 1, "require_approval": 2, "prohibit": 3}


def _above(parents: dict[str, list[str]], name: str) -> set[str]:
    """``name`` and every class above it."""
    return {name}.union(*(_above(parents, p) for p in parents.get(name, [])))


def _depth(parents: dict[str, list[str]], name: str) -> int:
    return 1 + max((_depth(parents, p) for p in parents.get(name, [])), default=0)


def _upstream(name: str) -> set[str]:
    datasets = WORLD["datasets"]
    return {name}.union(*(_upstream(p) for p in datasets[name].get("derived_from", [])))


def _action_score(action: list[str], tool: str) -> int | None:
    if not action:
        return 0
    (name,) = action
    if name == tool:
        return 1000
    if name == "t*":
        return 500 if tool.startswith("t") else None
    tool_classes = WORLD["tool_classes"]
    mine = set().union(*(_above(tool_classes, c) for c in WORLD["tools"][tool]))
    return 100 + _depth(tool_classes, name) if name in mine else None


def _object_score(obj: list[str], data: list[str]) -> int | None:
    if not obj:
        return 0
    (name,) = obj
    datasets, data_classes = WORLD["datasets"], WORLD["data_classes"]
    named = [d for d in data if d in datasets]
    if name in named:
        return 1000
    if any(name in _upstream(d) for d in named):
        return 900
    classes: set[str] = set()
    for item in data:
        if item in datasets:
            for up in _upstream(item):
                for cls in datasets[up].get("classes", []):
                    classes |= _above(data_classes, cls)
        else:
            classes |= _above(data_classes, item)
    return 100 + _depth(data_classes, name) if name in classes else None


def _condition_holds(condition: str, inv: Invocation) -> bool | None:
    """True/False for the conditions the strategies draw; None: not a condition (no score)."""
    n = inv.args["n"]
    return {"": None, "args.n > 5": n > 5, "args.n <= 5": n <= 5, "args.n >= 0": n >= 0,
            "args.missing > 1": False,  # a missing key: the rule does not match
            'agent.team == "a"': inv.team == "a"}[condition]


def reference_specificity(rule: dict[str, Any], inv: Invocation) -> int | None:
    """The rule's specificity for this call, or None when it does not match."""
    action = _action_score(rule.get("action", []), inv.tool)
    obj = _object_score(rule.get("object", []), inv.data)
    teams = rule.get("teams", [])
    holds = _condition_holds(rule.get("condition", ""), inv)
    if action is None or obj is None or (teams and inv.team not in teams) or holds is False:
        return None
    return action + obj + (10 if teams else 0) + (10 if holds else 0)


@dataclass
class Reference:
    outcome: str
    winner: str | None
    matched: dict[str, int]  # rule id -> specificity
    owed: list[str]  # oblige rules whose obligation opens
    waived: list[tuple[str, str]]  # (oblige rule, dispense rule)


def reference(rules: list[dict[str, Any]], inv: Invocation) -> Reference:
    matched = {r["id"]: s for r in rules if (s := reference_specificity(r, inv)) is not None}
    deciding = [r for r in rules if r["id"] in matched and r["modality"] in RANK]

    def beats(a: dict[str, Any], b: dict[str, Any]) -> bool:  # priority, specificity, modality
        return ((a.get("priority", 0), matched[a["id"]], RANK[a["modality"]])
                > (b.get("priority", 0), matched[b["id"]], RANK[b["modality"]]))

    # the winner: beaten by nobody; of several such (equal on every step), the first written
    unbeaten = [r for r in deciding if not any(beats(o, r) for o in deciding)]
    winner = unbeaten[0] if unbeaten else None
    outcome = winner["modality"] if winner else "permit"  # WORLD's default
    owed: list[str] = []
    waived: list[tuple[str, str]] = []
    if outcome != "prohibit":
        dispensing = [r for r in rules if r["id"] in matched and r["modality"] == "dispense"]
        for rule in rules:
            if rule["id"] in matched and rule["modality"] == "oblige":
                by = [d["id"] for d in dispensing if rule["id"] in d["waives"]]
                if by:
                    waived.append((rule["id"], by[0]))
                else:
                    owed.append(rule["id"])
    return Reference(outcome, winner["id"] if winner else None, matched, owed, waived)


def assert_agrees(decision: PolicyDecision, expected: Reference) -> None:
    assert {m.id: m.specificity for m in decision.matched} == expected.matched
    assert (decision.outcome, decision.winner) == (expected.outcome, expected.winner)
    assert [o.rule for o in decision.obligations] == expected.owed
    assert [(w.obligation_rule, w.by) for w in decision.waived] == expected.waived


def test_the_reference_reading_scores_hand_checked_cases():
    """Hand-checked readings, so the reference is not trusted blindly either."""
    inv = Invocation(tool="t1", data=["summary"], team="a", args={"n": 9})
    assert reference_specificity({"action": ["leaf"], "object": ["patients"]}, inv) == 103 + 900
    assert reference_specificity({"action": ["t*"], "object": ["phi"], "teams": ["a"],
                                  "condition": "args.n > 5"}, inv) == 500 + 103 + 10 + 10
    assert reference_specificity({"action": ["t2"]}, inv) is None
    assert reference_specificity({"object": ["web"]}, inv) is None


# looser than rule_strategy, so that most calls match several rules and conflicts are common
any_rule = st.fixed_dictionaries({
    "modality": st.sampled_from([*DECIDING, "oblige"]),
    "action": st.sampled_from([[], [], [], ["root"], ["t*"], *ACTIONS]),
    "object": st.sampled_from([[], [], [], ["data"], *OBJECTS]),
    "teams": st.sampled_from([[], [], [], ["a", "b"], ["a"]]),
    "condition": st.sampled_from(["", "", "", "args.n >= 0", *CONDITIONS]),
    "priority": st.integers(0, 1),
})


@settings(max_examples=400, deadline=None)
@given(rules=st.lists(any_rule, min_size=1, max_size=8),
       # twins: a copy of a rule under another modality, so that equal priority and
       # specificity happen often and the modality (then the order written) decides
       twins=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(DECIDING)), max_size=2),
       dispensations=st.lists(st.tuples(st.sets(st.integers(0, 6), min_size=1),
                                        st.sampled_from([[], ["a"], ["b"]]),
                                        st.sampled_from(ACTIONS)), max_size=2),
       inv=invocations)
def test_the_engine_decides_as_the_reference_reading_of_the_meta_policy(
    rules, twins, dispensations, inv
):
    """Every matched rule and its specificity, the outcome, the winner, the obligations and
    the waivers: as the brute-force reading above says, for random policies and calls."""
    rules = rules + [{**rules[i % len(rules)], "modality": m} for i, m in twins]
    written = with_ids(rules, "r")
    for i, r in enumerate(written):
        if r["modality"] == "oblige":
            r["what"] = f"duty {i}"
    obliged = [r["id"] for r in written if r["modality"] == "oblige"]
    for j, (named, teams, action) in enumerate(dispensations if obliged else []):
        written.append({"id": f"d{j}", "modality": "dispense", "teams": teams, "action": action,
                        "waives": sorted({obliged[i % len(obliged)] for i in named})})
    expected = reference(written, inv)
    event(f"outcome {expected.outcome}, {len(expected.matched)} matched")
    event(f"{len(expected.owed)} owed, {len(expected.waived)} waived")
    assert_agrees(build(written).evaluate(inv), expected)


@FAST
@given(
    rules=st.lists(rule_strategy(st.sampled_from(DECIDING)), min_size=1, max_size=6),
    extra=st.fixed_dictionaries({  # mostly general, so that it matches the call often
        "modality": st.just("permit"),
        "action": st.sampled_from(ACTIONS),
        "object": st.sampled_from(OBJECTS),
        "condition": st.sampled_from(["", "args.n >= 0", "args.n > 5"]),
        "priority": st.integers(0, 3),
    }),
    inv=invocations,
)
def test_a_permit_of_lower_or_equal_priority_never_turns_a_prohibit_into_a_permit(
    rules, extra, inv
):
    """...unless, at equal priority, it is strictly more specific (the meta-policy puts
    specificity before modality): then, and only then, it wins. Which case applies is read
    from the reference's specificities, never from the engine's own answer."""
    base_rules = with_ids(rules, "r")
    base_rules.append({"id": "floor", "modality": "prohibit", "priority": 0})  # always matches
    before = reference(base_rules, inv)
    assume(before.outcome == "prohibit")  # a call some prohibit decides; others are redrawn
    won = next(r for r in base_rules if r["id"] == before.winner)
    extra = {**extra, "id": "added", "priority": min(extra["priority"], won.get("priority", 0))}
    added = reference_specificity(extra, inv)
    beats = added is not None and extra["priority"] == won.get("priority", 0) \
        and added > before.matched[won["id"]]
    event(f"added permit: {'matched' if added is not None else 'no match'}, "
          f"{'wins' if beats else 'loses'}")
    assert build(base_rules).evaluate(inv).outcome == "prohibit"
    after = build(base_rules + [extra]).evaluate(inv)
    if beats:
        assert (after.outcome, after.winner) == ("permit", "added")
    else:
        assert (after.outcome, after.winner) == ("prohibit", before.winner)


def refine(general: dict[str, Any], steps: list[str]) -> dict[str, Any]:
    """A strictly more specific rule than ``general`` that still matches the call below."""
    specific = dict(general)
    for step in steps:
        if step == "action":
            order = [[], ["root"], ["mid"], ["leaf"], ["t1"]]
            position = order.index(specific["action"])
            specific["action"] = order[min(position + 1, len(order) - 1)]
        elif step == "object":
            order = [[], ["data"], ["sensitive"], ["phi"], ["patients"]]
            position = order.index(specific["object"])
            specific["object"] = order[min(position + 1, len(order) - 1)]
        elif step == "subject":
            specific["teams"] = ["a"]
        elif step == "condition":
            specific["condition"] = "args.n > 5"
    return specific


@FAST
@given(
    action=st.sampled_from([[], ["root"], ["mid"], ["leaf"]]),
    obj=st.sampled_from([[], ["data"], ["sensitive"], ["phi"]]),
    steps=st.lists(st.sampled_from(["action", "object", "subject", "condition"]), min_size=1,
                   max_size=4, unique=True),
    priority=st.integers(-2, 2),
    permit_first=st.booleans(),
)
def test_a_more_specific_prohibit_beats_a_general_permit_of_equal_priority(
    action, obj, steps, priority, permit_first
):
    general = {"id": "general", "modality": "permit", "action": action, "object": obj,
               "teams": [], "condition": "", "priority": priority}
    specific = {**refine(general, steps), "id": "specific", "modality": "prohibit"}
    assert specific != {**general, "id": "specific", "modality": "prohibit"}
    ordered = [general, specific] if permit_first else [specific, general]
    decision = build(ordered).evaluate(
        Invocation(tool="t1", data=["patients"], team="a", args={"n": 9})
    )
    assert set(decision.rules) == {"general", "specific"}
    assert (decision.outcome, decision.winner) == ("prohibit", "specific")
    assert decision.conflicts == [
        f'prohibit "specific" overrides permit "general": higher specificity '
        f"({decision.matched[ordered.index(specific)].specificity} > "
        f"{decision.matched[ordered.index(general)].specificity})"
    ]


@FAST
@given(
    obliges=st.lists(st.tuples(st.sampled_from(CONDITIONS), st.sampled_from(OBJECTS)),
                     min_size=1, max_size=6),
    named=st.sets(st.integers(0, 5), min_size=1),
    dispense_team=st.sampled_from([[], ["a"], ["b"]]),
    outcome_rule=st.sampled_from([None, "permit", "require_approval"]),
    inv=invocations,
)
def test_a_dispensation_removes_exactly_the_obligations_it_names(
    obliges, named, dispense_team, outcome_rule, inv
):
    oblige_rules = [{"id": f"o{i}", "modality": "oblige", "what": f"duty {i}", "condition": c,
                     "object": obj} for i, (c, obj) in enumerate(obliges)]
    waives = sorted({f"o{i % len(obliges)}" for i in named})
    deciding = [{"id": "d", "modality": outcome_rule}] if outcome_rule else []
    dispense = {"id": "waiver", "modality": "dispense", "waives": waives, "teams": dispense_team}
    with_it = build(oblige_rules + deciding + [dispense]).evaluate(inv)
    # what is owed without the waiver, by the reference: every matched oblige rule
    owed_before = reference(oblige_rules + deciding, inv).owed
    applies = not dispense_team or inv.team in dispense_team
    event(f"dispensation {'matches' if applies else 'does not match'}, "
          f"{len(owed_before)} owed before")
    assert ("waiver" in with_it.rules) == applies
    assert [o.rule for o in with_it.obligations] == (
        [r for r in owed_before if r not in waives] if applies else owed_before)
    assert [(w.obligation_rule, w.by) for w in with_it.waived] == (
        [(r, "waiver") for r in owed_before if r in waives] if applies else [])


@st.composite
def dags(draw: st.DrawFn) -> dict[str, Dataset]:
    """Random acyclic lineage: dataset i may derive only from datasets j < i."""
    size = draw(st.integers(1, 12))
    out: dict[str, Dataset] = {}
    for i in range(size):
        parents = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        classes = draw(st.sets(st.sampled_from(["phi", "pii", "public"]), max_size=1))
        out[f"d{i}"] = Dataset(classes=sorted(classes), derived_from=[f"d{p}" for p in parents])
    return out


def reachable(datasets: dict[str, Dataset], start: str) -> set[str]:
    seen, queue = {start}, deque([start])
    while queue:
        for parent in datasets[queue.popleft()].derived_from:
            if parent not in seen:
                seen.add(parent)
                queue.append(parent)
    return seen


@settings(max_examples=80, deadline=None)
@given(datasets=dags())
def test_lineage_is_transitive(datasets):
    lineage = Lineage(datasets)
    for name, dataset in datasets.items():
        up = reachable(datasets, name)
        assert lineage.upstream(name) == up
        assert lineage.classes(name) == {c for u in up for c in datasets[u].classes}
        for parent in dataset.derived_from:  # whatever a parent is, its children are too
            assert lineage.upstream(parent) <= lineage.upstream(name)
            assert lineage.classes(parent) <= lineage.classes(name)
    # and the engine follows it: a rule on phi matches a call over any descendant of phi data
    engine = build(
        [{"id": "phi-rule", "modality": "prohibit", "object": ["phi"]}],
        data_classes={"phi": [], "pii": [], "public": []},
        datasets={k: v.model_dump() for k, v in datasets.items()},
        tools={}, tool_classes={},
    )
    for name in datasets:
        is_phi = any("phi" in datasets[u].classes for u in reachable(datasets, name))
        outcome = engine.evaluate(Invocation(tool="t", data=[name])).outcome
        assert outcome == ("prohibit" if is_phi else "permit")


def test_modality_ranks_are_the_declared_order():
    assert MODALITY_RANK["prohibit"] > MODALITY_RANK["require_approval"] > MODALITY_RANK["permit"]
