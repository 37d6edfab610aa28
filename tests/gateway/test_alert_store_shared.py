"""The alert store on the real PostgreSQL test server, shared by two gateways: a condition
raised by both at once becomes one alert (the unique open key), a cleared one can be raised
anew, acknowledging and silencing are one transaction each with their command row, and a
silence carries over to the same condition raised again within it."""

from __future__ import annotations

import threading
from datetime import timedelta

from console.alert_model import AlertKind, Condition
from console.gateway.alert_store import AlertStore
from console.model import utcnow
from tests.adapters.postgres_server import postgres_server as postgres_server  # the fixture
from tests.gateway.pg_journals import OpenJournal
from tests.gateway.pg_journals import pg_journal as pg_journal  # the fixture

COND = Condition(kind=AlertKind.INTERRUPT_OVERDUE, subject="dbos:one/r#i1", run="dbos:one/r",
                 backend="dbos", context="one", detail="interrupt overdue")


def _command(key: str, action: str) -> dict[str, str]:
    return {"key": key, "action": action, "identity": "ops", "role": "operator"}


def test_two_gateways_raising_one_condition_at_once_make_one_alert(
        pg_journal: OpenJournal) -> None:
    stores = [AlertStore(pg_journal("gw-a")), AlertStore(pg_journal("gw-b"))]
    for round_ in range(10):
        cond = Condition(kind=AlertKind.STALLED, subject=f"dbos:one/r{round_}", detail="d")
        barrier = threading.Barrier(2)
        got: dict[int, object] = {}

        def raise_one(i: int, cond: Condition = cond, barrier: threading.Barrier = barrier,
                      got: dict[int, object] = got) -> None:
            barrier.wait()
            got[i] = stores[i].raise_alert(cond, utcnow(), utcnow(), f"gw-{i}")

        threads = [threading.Thread(target=raise_one, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert sum(1 for a in got.values() if a is not None) == 1, (round_, got)
    assert len(stores[1].active()) == 10


def test_clear_then_raise_again_ack_and_silence(pg_journal: OpenJournal) -> None:
    store = AlertStore(pg_journal("gw-a"))
    now = utcnow()
    first = store.raise_alert(COND, now, now)
    assert first is not None and first.state == "open"
    assert store.raise_alert(COND, now, now) is None  # already open
    acked = store.acknowledge(first.id, by="ops", reason="on it", at=now,
                              command=_command("k1", "alert_ack"))
    assert acked.outcome == "applied" and acked.alert is not None
    assert acked.alert.state == "acknowledged" and acked.alert.acked_by == "ops"
    again = store.acknowledge(first.id, by="ops2", reason="me too", at=now,
                              command=_command("k2", "alert_ack"))
    assert again.outcome == "conflict" and "ops" in again.detail
    silenced = store.silence(first.id, now + timedelta(hours=2), by="ops", reason="known",
                             at=now, command=_command("k3", "alert_silence"))
    assert silenced.alert is not None and silenced.alert.silenced(now)
    cleared = store.clear(first.id, now)
    assert cleared is not None and cleared.state == "cleared"
    assert store.clear(first.id, now) is None
    second = store.raise_alert(COND, now, now)  # the condition is back: a new alert, silenced
    assert second is not None and second.id != first.id
    assert second.silenced(now) and second.silenced_by == "ops"
    assert [a.id for a in store.listing()] == [second.id]
    assert {a.id for a in store.listing(include_cleared=True)} == {first.id, second.id}
    missing = store.acknowledge("al-nope", by="ops", reason="x", at=now,
                                command=_command("k4", "alert_ack"))
    assert missing.error == "not_found"
