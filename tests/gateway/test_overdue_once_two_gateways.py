"""An obligation turns overdue once across gateways sharing one PostgreSQL journal (the
``pgserver`` wheel's server): both gateways scan every second, and the scan is one ``UPDATE …
RETURNING``, so exactly one of them gets each obligation back (and publishes the one notice,
which peering.py carries to the other). Before, both could read it as open and both notify."""

from __future__ import annotations

import threading
from datetime import timedelta

from console.gateway.obligation_store import ObligationStore
from console.model import utcnow
from console.policy.model import Obligation
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import OpenJournal
from tests.gateway.pg_journals import pg_journal as pg_journal  # the fixture


def test_two_gateways_scanning_at_once_mark_each_obligation_overdue_once(
        pg_journal: OpenJournal) -> None:
    stores = [ObligationStore(pg_journal("gw-a")), ObligationStore(pg_journal("gw-b"))]
    now = utcnow()
    total: list[str] = []
    for round_ in range(20):
        for n in range(5):
            stores[0].add(Obligation(id=f"run-{round_}#c{n}/notify", rule="notify",
                                     run_id=f"dbos:one/run-{round_}", what="tell the owner",
                                     created_at=now - timedelta(minutes=5),
                                     due_at=now - timedelta(seconds=1)))
        barrier = threading.Barrier(2)
        found: dict[str, list[str]] = {}

        def scan(store: ObligationStore, name: str, barrier: threading.Barrier = barrier,
                 found: dict[str, list[str]] = found) -> None:
            barrier.wait()
            found[name] = [ob.id for ob in store.mark_overdue(utcnow())]

        threads = [threading.Thread(target=scan, args=(s, n))
                   for s, n in zip(stores, ("a", "b"), strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        both = found["a"] + found["b"]
        assert sorted(both) == sorted(set(both)) and len(both) == 5, (round_, found)
        total.extend(both)
    assert len(total) == 100
    assert all(ob.state == "overdue" for ob in stores[1].listing(state="overdue"))
    assert stores[1].mark_overdue(utcnow()) == []


def test_a_scan_returns_only_due_open_obligations_as_overdue(pg_journal: OpenJournal) -> None:
    store = ObligationStore(pg_journal("gw-a"))
    now = utcnow()
    store.add(Obligation(id="later", rule="r", run_id="dbos:one/x", what="w", created_at=now,
                         due_at=now + timedelta(hours=1)))
    store.add(Obligation(id="due", rule="r", run_id="dbos:one/x", what="w", created_at=now,
                         due_at=now - timedelta(seconds=1)))
    store.add(Obligation(id="none", rule="r", run_id="dbos:one/x", what="w", created_at=now))
    marked = store.mark_overdue(utcnow())
    assert [(ob.id, ob.state) for ob in marked] == [("due", "overdue")]
