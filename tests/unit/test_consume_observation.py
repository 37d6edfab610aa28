"""The poll loop hands the hub an adapter's runs through ``consume``: each is dropped from the
observation's list as it is merged, so what only the list held is freed as the index grows
(background_loops.py); every run is indexed all the same."""

from __future__ import annotations

import gc
import weakref

from console.gateway.background_loops import consume
from console.gateway.hub import Hub
from console.model import Run


class Item:
    pass


def test_each_item_is_freed_once_handed_out_and_the_list_ends_empty() -> None:
    items = [Item() for _ in range(3)]
    refs = [weakref.ref(i) for i in items]
    seen = []
    for item in consume(items):
        seen.append(refs.index(weakref.ref(item)))
        del item
        gc.collect()
        assert [r() is None for r in refs][: len(seen)] == [True] * len(seen)
    assert seen == [0, 1, 2] and items == []


def test_the_hub_indexes_every_consumed_run() -> None:
    hub = Hub()
    runs = [Run(id=f"dbos:local/wf-{i}", backend="dbos", context="local", native_id=f"wf-{i}")
            for i in range(50)]
    hub.observe_runs(consume(runs))
    assert runs == [] and sorted(hub.runs) == sorted(f"dbos:local/wf-{i}" for i in range(50))
