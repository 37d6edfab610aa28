"""The garbage-collection policy of the TUI and the gateway (console/gc_policy.py)."""

from __future__ import annotations

import gc

from console.gc_policy import GcPolicy


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_survivors_are_frozen_and_leaked_cycles_are_collected_at_the_next_check() -> None:
    policy = GcPolicy(growth=1.0, slack=100, check_every=3)
    try:
        policy.start()
        base = gc.get_freeze_count()
        assert policy.full_collections == 1
        kept = [Node() for _ in range(50)]
        policy.tick()
        assert gc.get_freeze_count() >= base + 50  # survivors frozen: collections skip them
        leaked = [Node() for _ in range(500)]
        policy.tick()  # frozen while alive...
        del leaked  # ...then dropped: cyclic garbage the collector no longer looks at
        assert policy.full_collections == 1
        policy.tick()  # the third tick counts the frozen objects: well past the base
        assert policy.full_collections == 2
        assert gc.get_freeze_count() < base + 500  # the leaked cycles are gone
        assert len(kept) == 50
    finally:
        policy.stop()
    assert gc.get_freeze_count() == 0


def test_a_stopped_or_unstarted_policy_does_nothing() -> None:
    policy = GcPolicy()
    policy.tick()
    assert gc.get_freeze_count() == 0
    assert policy.full_collections == 0


def test_rebase_collects_once_only_when_started() -> None:
    policy = GcPolicy()
    policy.rebase()
    assert policy.full_collections == 0
    try:
        policy.start()
        policy.rebase()
        assert policy.full_collections == 2
        assert policy.base == gc.get_freeze_count()
    finally:
        policy.stop()


def test_the_gateway_collects_fully_once_after_its_index_grew_by_half(tmp_path) -> None:
    from console.gateway.server import Gateway
    from console.gateway.settings import GatewaySettings
    from console.model import Run

    gateway = Gateway(GatewaySettings(port=0, home=tmp_path))
    policy = gateway.gc_policy
    assert policy.young == 0  # the gateway freezes its middle generation as it is
    try:
        policy.start(collect=False)
        assert policy.full_collections == 0  # a gateway inside a test process: no full pass
        gateway.hub.observe_runs([Run(id=f"dbos:local/wf-{i}", backend="dbos",
                                      context="local", native_id=f"wf-{i}")
                                  for i in range(12_000)])
        gateway.loops.gc_tick()  # a first poll of 12,000 runs: the index grew past 10,000
        assert policy.full_collections == 1
        gateway.loops.gc_tick()
        gateway.loops.gc_tick()  # no growth: survivors frozen, no full collection
        assert policy.full_collections == 1
    finally:
        policy.stop()
        gateway.journal.close()
