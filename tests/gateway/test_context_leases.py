"""Context leases (console/gateway/context_leases.py) against a real PostgreSQL server (the
``pgserver`` wheel: tests/adapters/postgres_server.py), each test on a fresh database, with
real journals as the gateways open them. No gateway process: the lease rounds are driven by
the test, so each step (join, balance, lapse, release) is seen on its own."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from console.gateway.context_leases import ContextLeases
from console.gateway.journal_engines import open_journal
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import OpenJournal
from tests.gateway.pg_journals import pg_journal as pg_journal  # the fixture

CONTEXTS = ["dbos:a", "dbos:b", "temporal:c", "restate:d"]
_databases = itertools.count()
Keeper = Callable[..., ContextLeases]


@pytest.fixture
def keeper(pg_journal: OpenJournal) -> Keeper:
    """Opens a lease keeper (its own journal connection) on one fresh database."""

    def open_keeper(holder: str, contexts: list[str] = CONTEXTS,
                    ttl_s: float = 3.0) -> ContextLeases:
        return ContextLeases(pg_journal(holder), holder, contexts, ttl_s=ttl_s)

    return open_keeper


def holders(*keepers: ContextLeases) -> dict[str, list[str]]:
    """context -> the keepers that think they hold it."""
    seen: dict[str, list[str]] = {c: [] for c in CONTEXTS}
    for k in keepers:
        for c in k.held:
            seen[c].append(k.holder)
    return seen


def test_a_lone_gateway_holds_every_context(keeper: Keeper) -> None:
    a = keeper("gw-a")
    change = a.renew()
    assert a.held == set(CONTEXTS) and change.taken == set(CONTEXTS)
    assert a.stats()["members"] == ["gw-a"]
    assert {row["holder"] for row in a.stats()["leases"]} == {"gw-a"}


def test_a_joining_gateway_gets_its_fair_share_and_no_context_has_two_holders(
        keeper: Keeper) -> None:
    a, b = keeper("gw-a"), keeper("gw-b")
    a.renew()
    b.renew()  # joins: everything is held, nothing to take yet
    assert b.held == set() and a.held == set(CONTEXTS)
    a.renew()  # sees two members: keeps ceil(4/2) = 2, releases the rest
    assert len(a.held) == 2
    b.renew()
    assert len(b.held) == 2 and not a.held & b.held
    for _ in range(3):  # stable: nobody flaps
        a.renew()
        b.renew()
        assert all(len(h) == 1 for h in holders(a, b).values()), holders(a, b)


def lease_rows(k: ContextLeases) -> dict[str, tuple[str, float, float]]:
    """context -> (holder, expires_at, taken_at), read from the journal (its clock)."""
    with k.journal.transaction() as tx:
        return {r[0]: (r[1], float(r[2]), float(r[3])) for r in tx.execute(
            "SELECT context_key, holder, expires_at, taken_at FROM irq_context_lease"
            ).fetchall()}


def until_lapsed(k: ContextLeases) -> None:
    """Wait until the journal's clock is past every lease ``k`` holds (it stalled)."""
    ends = [e for h, e, _ in lease_rows(k).values() if h == k.holder]
    assert ends, "it holds nothing"
    while True:
        with k.journal.transaction() as tx:
            now = float(tx.execute("SELECT extract(epoch from clock_timestamp())").fetchone()[0])
        if now > max(ends):
            return
        time.sleep(0.05)


def test_the_leases_of_a_gateway_that_stops_renewing_are_taken_after_they_lapse(
        keeper: Keeper) -> None:
    a, b = keeper("gw-a", ttl_s=1.0), keeper("gw-b", ttl_s=1.0)
    a.renew()
    b.renew()
    a.renew()
    b.renew()
    assert len(b.held) == 2
    # a is "SIGKILLed": it renews no more; its leases run out when the journal says so
    a_leases = {c: e for c, (h, e, _) in lease_rows(a).items() if h == "gw-a"}
    assert set(a_leases) == a.held
    began = time.monotonic()
    while b.held != set(CONTEXTS):
        assert time.monotonic() - began < 60, b.stats()  # a hang guard, not a speed claim
        b.renew()
        time.sleep(0.1)
    taken = lease_rows(b)
    for context, expired_at in a_leases.items():  # not before a's lease lapsed
        holder, _, taken_at = taken[context]
        assert holder == "gw-b" and taken_at > expired_at, (context, taken_at, expired_at)
    assert b.stats()["members"] == ["gw-b"]


def test_a_clean_stop_hands_the_contexts_over_at_the_next_round(keeper: Keeper) -> None:
    a, b = keeper("gw-a"), keeper("gw-b")
    a.renew()
    b.renew()
    a.renew()
    b.renew()
    a.release_all()
    assert a.held == set()
    change = b.renew()  # no waiting for a lapse
    assert b.held == set(CONTEXTS) and len(change.taken) == 2


def test_a_gateway_whose_lease_was_taken_learns_it_at_its_next_round(keeper: Keeper) -> None:
    a, b = keeper("gw-a", ttl_s=0.5), keeper("gw-b", ttl_s=0.5)
    a.renew()
    until_lapsed(a)  # a stalled (a long pause): its leases lapsed
    b.renew()
    assert b.held == set(CONTEXTS)
    change = a.renew()
    assert set(change.lost) == set(CONTEXTS) and a.held == set()  # never two holders


def test_two_gateways_reaching_for_the_same_free_leases_at_once_get_one_each(
        keeper: Keeper) -> None:
    for _ in range(5):
        contexts = [f"dbos:x{next(_databases)}"]
        a, b = keeper("gw-a", contexts), keeper("gw-b", contexts)
        barrier = threading.Barrier(2)

        def race(k: ContextLeases, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            k.renew()

        threads = [threading.Thread(target=race, args=(k,)) for k in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(a.held) + len(b.held) == 1, (a.held, b.held)


def test_on_the_sqlite_journal_every_context_is_held_and_nothing_is_written(
        tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "gateway.db", owner="gw-a")
    try:
        leases = ContextLeases(journal, "gw-a", CONTEXTS)
        assert leases.held == set(CONTEXTS) and not leases.shared
        assert leases.renew().taken == frozenset()
        leases.release_all()
        with journal.transaction() as tx:
            tables = {r[0] for r in tx.execute(
                "SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
        assert "irq_context_lease" not in tables
    finally:
        journal.close()


def test_gateways_with_different_backends_share_what_they_can_and_nothing_is_left_unpolled(
        keeper: Keeper) -> None:
    a = keeper("gw-a")  # all four contexts
    b = keeper("gw-b", ["dbos:a", "dbos:b"])  # only two of them
    a.renew()
    for _ in range(4):
        b.renew()
        a.renew()
    assert b.held == {"dbos:a", "dbos:b"} and a.held == {"temporal:c", "restate:d"}
    for _ in range(3):  # stable
        b.renew()
        a.renew()
        assert b.held == {"dbos:a", "dbos:b"} and a.held == {"temporal:c", "restate:d"}
    b.release_all()
    a.renew()
    assert a.held == set(CONTEXTS)


def test_the_assignment_is_fair_sticky_and_places_the_rarest_contexts_first() -> None:
    from console.gateway.context_leases import assignment

    everything = set(CONTEXTS)
    two = {"gw-a": everything, "gw-b": everything}
    placed = assignment(two, dict.fromkeys(CONTEXTS, "gw-a"))
    assert sorted(placed.values()).count("gw-a") == 2  # A keeps two, B gets two
    assert all(placed[c] == "gw-a" for c in sorted(CONTEXTS)[:2])  # the ones A keeps
    assert assignment(two, placed) == placed  # and then nothing moves
    three = {**two, "gw-c": everything}  # a third joins: 2, 1, 1, and only one context moves
    spread = assignment(three, placed)
    assert sorted(list(spread.values()).count(m) for m in three) == [1, 1, 2]
    assert sum(spread[c] != placed[c] for c in CONTEXTS) == 1
    only_a = {"gw-a": everything, "gw-b": {"dbos:a"}}
    assert assignment(only_a, dict.fromkeys(CONTEXTS, "gw-a"))["dbos:a"] == "gw-b"
