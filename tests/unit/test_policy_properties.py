"""Properties of the engine (hypothesis): conflict resolution, dispensations, lineage."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from console.policy.classes import Lineage
from console.policy.engine import MODALITY_RANK, PolicyEngine
from console.policy.loader import policy_from_data
from console.policy.model import Dataset, Invocation

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
    specificity before modality): then, and only then, it wins."""
    base_rules = with_ids(rules, "r")
    base_rules.append({"id": "floor", "modality": "prohibit", "priority": 0})  # always matches
    before = build(base_rules).evaluate(inv)
    event(f"before: {before.outcome}")
    if before.outcome != "prohibit":
        return
    won = next(m for m in before.matched if m.id == before.winner)
    extra = {**extra, "id": "added", "priority": min(extra["priority"], won.priority)}
    after = build(base_rules + [extra]).evaluate(inv)
    added = next((m for m in after.matched if m.id == "added"), None)
    beats = added is not None and added.priority == won.priority \
        and added.specificity > won.specificity
    event(f"added permit: {'matched' if added else 'no match'}, {'wins' if beats else 'loses'}")
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
    without = build(oblige_rules + deciding).evaluate(inv)
    dispense = {"id": "waiver", "modality": "dispense", "waives": waives, "teams": dispense_team}
    with_it = build(oblige_rules + deciding + [dispense]).evaluate(inv)
    owed_before = [o.rule for o in without.obligations]
    assert (with_it.outcome, with_it.winner) == (without.outcome, without.winner)
    event(f"dispensation {'matched' if 'waiver' in with_it.rules else 'did not match'}")
    if "waiver" in with_it.rules:
        assert [o.rule for o in with_it.obligations] == [r for r in owed_before
                                                         if r not in waives]
        assert [(w.obligation_rule, w.by) for w in with_it.waived] == [
            (r, "waiver") for r in owed_before if r in waives]
    else:
        assert not dispense_team or inv.team not in dispense_team
        assert [o.rule for o in with_it.obligations] == owed_before and with_it.waived == []


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
