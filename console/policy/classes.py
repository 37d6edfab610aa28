"""Class hierarchies and data lineage: the structure rules reason over.

A hierarchy maps a class to its parent classes (``phi -> [sensitive]``, ``sensitive -> [data]``);
a class is a member of every ancestor (``phi`` data is ``sensitive`` data). Lineage maps a
dataset to the datasets it is derived from; a dataset carries the classes of every upstream
dataset, transitively (what is derived from PHI is PHI). Closures are memoized: a policy is
immutable once loaded, so each class or dataset is expanded once per engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from console.policy.model import Dataset, Policy


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle of ``graph`` (node -> successors) as ``[a, b, ..., a]``, or None.

    Iterative depth-first search (a 10,000-deep hierarchy must not hit the recursion limit).
    """
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        path: list[str] = [root]
        on_path: set[str] = {root}
        iters = [iter(graph.get(root, ()))]
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                iters.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            if nxt in on_path:
                return path[path.index(nxt):] + [nxt]
            if nxt in done:
                continue
            path.append(nxt)
            on_path.add(nxt)
            iters.append(iter(graph.get(nxt, ())))
    return None


class Hierarchy:
    """A class hierarchy: ``ancestors(c)`` (c included) and ``depth(c)`` (a root is 1)."""

    def __init__(self, parents: Mapping[str, Sequence[str]]) -> None:
        cycle = find_cycle(parents)
        if cycle is not None:
            raise ValueError("cycle " + " -> ".join(cycle))
        self._parents: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in parents.items()}
        names = set(self._parents)
        for above in self._parents.values():
            names.update(above)
        self._names = frozenset(names)
        self._ancestors: dict[str, frozenset[str]] = {}
        self._depth: dict[str, int] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def names(self) -> frozenset[str]:
        """Every class the hierarchy knows: the declared ones and every parent they name."""
        return self._names

    def parents(self, name: str) -> tuple[str, ...]:
        return self._parents.get(name, ())

    def ancestors(self, name: str) -> frozenset[str]:
        """``name`` and every class above it."""
        cached = self._ancestors.get(name)
        if cached is not None:
            return cached
        # iterative post-order so a deep chain does not recurse
        stack: list[tuple[str, bool]] = [(name, False)]
        while stack:
            node, expanded = stack.pop()
            if node in self._ancestors:
                continue
            parents = self._parents.get(node, ())
            if expanded:
                acc = {node}
                for parent in parents:
                    acc |= self._ancestors[parent]
                self._ancestors[node] = frozenset(acc)
                continue
            stack.append((node, True))
            stack.extend((p, False) for p in parents if p not in self._ancestors)
        return self._ancestors[name]

    def depth(self, name: str) -> int:
        """Length of the longest path from ``name`` up to a root, counting both ends."""
        cached = self._depth.get(name)
        if cached is not None:
            return cached
        stack: list[tuple[str, bool]] = [(name, False)]
        while stack:
            node, expanded = stack.pop()
            if node in self._depth:
                continue
            parents = self._parents.get(node, ())
            if expanded:
                self._depth[node] = 1 + max((self._depth[p] for p in parents), default=0)
                continue
            stack.append((node, True))
            stack.extend((p, False) for p in parents if p not in self._depth)
        return self._depth[name]

    def expand(self, names: Iterable[str]) -> frozenset[str]:
        out: set[str] = set()
        for name in names:
            out |= self.ancestors(name)
        return frozenset(out)


class Lineage:
    """Datasets and what they derive from: ``upstream(d)`` (d included) and ``classes(d)``."""

    def __init__(self, datasets: Mapping[str, Dataset]) -> None:
        graph = {name: list(ds.derived_from) for name, ds in datasets.items()}
        cycle = find_cycle(graph)
        if cycle is not None:
            raise ValueError("lineage cycle " + " -> ".join(cycle))
        self._hierarchy = Hierarchy(graph)
        self._datasets = dict(datasets)
        self._classes: dict[str, frozenset[str]] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._datasets

    def upstream(self, name: str) -> frozenset[str]:
        """``name`` and every dataset it is derived from, transitively."""
        return self._hierarchy.ancestors(name)

    def declared(self, name: str) -> tuple[str, ...]:
        """The classes declared on ``name`` itself."""
        known = self._datasets.get(name)
        return tuple(known.classes) if known is not None else ()

    def classes(self, name: str) -> frozenset[str]:
        """The data classes declared on ``name`` and on every upstream dataset (not expanded
        through the class hierarchy; see ``Taxonomy.expand_data``)."""
        cached = self._classes.get(name)
        if cached is not None:
            return cached
        out: set[str] = set()
        for ds in self.upstream(name):
            known = self._datasets.get(ds)
            if known is not None:
                out.update(known.classes)
        result = frozenset(out)
        self._classes[name] = result
        return result


@dataclass(frozen=True)
class DataFacts:
    """What a call touches, after hierarchy and lineage expansion."""

    classes: frozenset[str]  # every data class (declared, inherited, up the hierarchy)
    datasets: frozenset[str]  # every dataset touched or upstream of one touched
    direct: frozenset[str]  # the dataset names the call itself named
    sorted_classes: tuple[str, ...]
    sorted_datasets: tuple[str, ...]
    names: frozenset[str]  # classes | datasets: what a rule's object may name


class Taxonomy:
    """Tool classes, data classes and lineage of one policy, with memoized expansions."""

    def __init__(self, policy: Policy) -> None:
        self.tool_classes = Hierarchy(policy.tool_classes)
        self.data_classes = Hierarchy(policy.data_classes)
        self.lineage = Lineage(policy.datasets)
        self._tools = {name: tuple(classes) for name, classes in policy.tools.items()}
        self._tool_cache: dict[str, frozenset[str]] = {}
        self._data_cache: dict[tuple[str, ...], DataFacts] = {}

    def classes_of_tool(self, tool: str) -> frozenset[str]:
        """Every tool class ``tool`` belongs to (its declared classes and their ancestors)."""
        cached = self._tool_cache.get(tool)
        if cached is None:
            cached = self.tool_classes.expand(self._tools.get(tool, ()))
            self._tool_cache[tool] = cached
        return cached

    def tools(self) -> dict[str, tuple[str, ...]]:
        return dict(self._tools)

    def expand_data(self, data: Sequence[str]) -> DataFacts:
        """Dataset names and data classes a call names -> every class and dataset it touches.

        A dataset contributes itself, its upstream datasets and all their classes; a class
        contributes itself and its ancestors; a name that is neither is kept as a class.
        """
        key = tuple(data)
        cached = self._data_cache.get(key)
        if cached is not None:
            return cached
        classes: set[str] = set()
        datasets: set[str] = set()
        direct: set[str] = set()
        for item in key:
            if item in self.lineage:
                direct.add(item)
                datasets |= self.lineage.upstream(item)
                classes |= self.data_classes.expand(self.lineage.classes(item))
            else:
                classes |= self.data_classes.ancestors(item)
        facts = DataFacts(
            frozenset(classes), frozenset(datasets), frozenset(direct),
            tuple(sorted(classes)), tuple(sorted(datasets)), frozenset(classes | datasets),
        )
        if len(self._data_cache) >= 4096:
            self._data_cache.clear()
        self._data_cache[key] = facts
        return facts
